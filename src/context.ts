// What handlers may depend on. Each handler module takes only the members it uses.
import type { Config } from './config.js'
import type { Db } from './db/index.js'
import type { Logger } from './logger.js'

export type Services = {
  config: Config
  db: Db
  logger: Logger
}
