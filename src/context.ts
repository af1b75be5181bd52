// What handlers may depend on. Each handler module takes only the members it uses.
import type { Keypair } from '@atproto/crypto'
import type { Config } from './config.js'
import type { Db } from './db/index.js'
import type { Logger } from './logger.js'
import type { TokenKeys } from './auth/session-tokens.js'
import type { Firehose } from './sequencer/firehose.js'
import type { Metrics } from './metrics.js'

export type Services = {
  config: Config
  db: Db
  logger: Logger
  tokenKeys: TokenKeys
  /** the server's PLC rotation key (PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX) */
  rotationKey: Keypair
  firehose: Firehose
  /** Prometheus counters; modules bump theirs (e.g. metrics.emailFailures.inc()) */
  metrics: Metrics
}
