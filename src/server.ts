// Wiring: the server starts in three parts, each building itself and registering its own
// teardown: the services handlers receive, the HTTP app and its listener, the background jobs.
// Close stops them in reverse: jobs first, then the listener drains, then the services close.
import type { Config } from './config.js'
import type { Services } from './context.js'
import { createLogger } from './logger.js'
import { Lifecycle } from './start/lifecycle.js'
import { startServices } from './start/services.js'
import { startHttp } from './start/http.js'
import { startJobs } from './start/jobs.js'
import type { StartOptions } from './start/options.js'

export type { StartOptions }

export { version } from './start/http.js'

export type Pds = {
  services: Services
  /** method ids with a handler */
  methods: string[]
  url: string
  port: number
  close(): Promise<void>
}

export async function startPds(config: Config, opts: StartOptions = {}): Promise<Pds> {
  const logger = opts.logger ?? createLogger(config.logLevel)
  for (const w of config.warnings) logger.warn(w)
  const life = new Lifecycle(logger)
  life.onClose('log', () => logger.info('pds stopped'))
  try {
    const { services, rateLimits } = await startServices(config, opts, logger, life)
    const { methods, port, url } = await startHttp(services, rateLimits, opts, life)
    await startJobs(services, opts, life)
    return { services, methods, port, url, close: () => life.close() }
  } catch (err) {
    // a start that failed half-way stops what it had started before saying why
    await life.close()
    throw err
  }
}
