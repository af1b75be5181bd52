// Wiring: the server starts in three parts, each building itself and registering its own
// teardown: the services handlers receive, the HTTP app and its listener, the background jobs.
// Close stops them in reverse: jobs first, then the listener drains, then the services close.
import type { Config } from './config.js'
import type { Services, TestHooks } from './context.js'
import { createLogger, type Logger } from './logger.js'
import type { FirehoseOptions } from './sequencer/firehose.js'
import type { CrawlerOptions } from './sequencer/crawlers.js'
import type { RateLimitTuning } from './auth/rate-limits.js'
import type { HttpLimits } from './limits.js'
import { Lifecycle } from './start/lifecycle.js'
import { startServices } from './start/services.js'
import { startHttp } from './start/http.js'
import { startJobs } from './start/jobs.js'

export { version } from './start/http.js'

export type Pds = {
  services: Services
  /** method ids with a handler */
  methods: string[]
  url: string
  port: number
  close(): Promise<void>
}

export type StartOptions = {
  logger?: Logger
  /** tuning the tests use; operators have no reason to change these */
  firehose?: Partial<FirehoseOptions>
  rateLimits?: RateLimitTuning
  crawlers?: Partial<CrawlerOptions>
  http?: Partial<HttpLimits>
  /** fault injection for tests only */
  testHooks?: TestHooks
  /**
   * check every response body against its lexicon before sending it (the tests do; in service,
   * as with the reference PDS, the handlers' types and the tests stand for it)
   */
  validateResponses?: boolean
  /** how often expired passkey challenges are deleted (tests shorten it) */
  challengeSweepMs?: number
  /** scheduled S3 backups in milliseconds instead of PDS_BACKUP_INTERVAL_HOURS (tests) */
  backups?: { intervalMs?: number; checkMs?: number }
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
