// The server's own work beside the requests: asking relays to crawl, the blob sweep, the passkey
// challenge sweep and scheduled backups. Each registers its own stop; they start once the
// listener is up (a relay asked to crawl connects back at once).
import type { Services } from '../context.js'
import type { StartOptions } from './options.js'
import { sweepExpiredChallenges } from '../account/factors/passkeys.js'
import { sweepBlobs } from '../blob/blobstore-gc.js'
import { Crawlers } from '../sequencer/crawlers.js'
import { recordCrawl } from '../sequencer/crawl-log.js'
import { CRAWL_TUNING, JOBS } from '../limits.js'
import type { Lifecycle } from './lifecycle.js'

export async function startJobs(services: Services, opts: StartOptions, life: Lifecycle): Promise<void> {
  const { config, db, logger, firehose, metrics } = services
  const crawlers = new Crawlers(config.crawlers, config.hostname, firehose, logger, metrics, {
    ...CRAWL_TUNING,
    intervalMs: config.crawlIntervalMinutes * 60_000,
    onOutcome: (relay, ok) => recordCrawl(config.dataDir, relay, ok),
    ...opts.crawlers,
  })
  crawlers.start()
  life.onClose('crawlers', () => crawlers.stop())

  // the AWS SDK loads only when scheduled backups are configured
  if (config.backupS3) {
    const backups = (await import('../cli/backup-s3.js')).scheduleBackups(config, db, logger, opts.backups)
    life.onClose('backups', () => backups.stop())
  }

  // expired passkey challenges leave by an indexed delete here, never on a request's path
  life.every('passkey challenge sweep', opts.challengeSweepMs ?? JOBS.challengeSweepMs, () => {
    sweepExpiredChallenges(db).catch((err) => logger.warn({ err }, 'passkey challenge sweep failed'))
  })

  life.every('blob sweep', JOBS.blobSweepMs, () => {
    sweepBlobs(services, config.blobGraceMs)
      .then(
        ({ removed, bytes, staged }) =>
          (removed.length || staged) && logger.info({ removed: removed.length, bytes, staged }, 'blobs swept'),
      )
      .catch((err) => logger.warn({ err }, 'blob sweep failed'))
  })
}
