// What startPds takes besides the configuration: tuning and hooks the tests use.
import type { Logger } from '../logger.js'
import type { FirehoseOptions } from '../sequencer/firehose.js'
import type { RateLimitTuning } from '../auth/rate-limits.js'
import type { CrawlerOptions } from '../sequencer/crawlers.js'
import type { HttpLimits } from '../limits.js'
import type { TestHooks } from '../context.js'

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
