// Tuning numbers: how long, how often, how many, how large. Each says why it is what it is.
// Rules of the protocol (token lifetimes, frame formats, close codes) stay where the rule lives;
// what an operator may change is a setting in config.ts instead.

export type HttpLimits = {
  maxHeaderBytes: number
  /** a client must finish sending its headers within this */
  headersTimeoutMs: number
  /** and its whole request (body included: blob uploads) within this */
  requestTimeoutMs: number
  keepAliveTimeoutMs: number
  /** how often the timeouts above are enforced */
  checkIntervalMs: number
  wsMaxPayloadBytes: number
}

export const HTTP_LIMITS: HttpLimits = {
  // twice what a browser's cookies and a DPoP proof take; more is abuse
  maxHeaderBytes: 16 * 1024,
  // a slow client has this long for its headers: enough on a bad mobile link, short for slowloris
  headersTimeoutMs: 20_000,
  // a large blob upload over a slow link finishes within five minutes
  requestTimeoutMs: 300_000,
  // above the 60 s idle timeout of common proxies, so the proxy closes first
  keepAliveTimeoutMs: 65_000,
  // the timeouts above are checked this often: their precision, at the cost of one timer
  checkIntervalMs: 5_000,
  // firehose subscribers only send a handshake: a client frame beyond a few KiB is abuse
  wsMaxPayloadBytes: 16 * 1024,
}

/** a served method's JSON body: records are at most a few hundred KiB, with room to spare */
export const JSON_BODY_BYTES = 1024 * 1024
/** deep enough for any record a lexicon describes, shallow enough that validation cannot run away */
export const MAX_JSON_DEPTH = 64

/** a Redis that does not answer within this at start is a mistake in PDS_REDIS_URL, said in one line */
export const REDIS_READY_MS = 5000
/** Redis answers in milliseconds: a command unanswered this long is a hang, and the rate limits let the request through */
export const REDIS_COMMAND_MS = 2000

/** what a subscribeRepos consumer may cost before it is dropped, and how the log is read for it */
// checked against FirehoseOptions where the firehose is built; typing it here would import upward
export const FIREHOSE_TUNING = {
  // without a wake-up channel another process's events arrive this late; one indexed read each
  pollMs: 25,
  // a lost PostgreSQL notification delays events by at most this
  safetyPollMs: 1000,
  // a relay stalls for seconds at most while events arrive; beyond that it is not keeping up
  maxBuffer: 5000,
  // bounds the memory one slow consumer can hold
  maxBacklogBytes: 16 * 1024 * 1024,
  // a replaying consumer that reads nothing for this long has gone away
  stallMs: 30_000,
  // replays read the log hard: four at once leave the store to the writes
  maxBackfills: 4,
}

/** how the firehose reads the event log and hands events out (not options: nothing else sets them) */
export const FIREHOSE_READS = {
  // the poller's rows per read, consumers draining between reads: a backlog reaches them in
  // bursts of at most this many events
  livePage: 500,
  // a replay's rows per read, with a turn of the event loop after each: 300 replays at once must
  // leave every other request answered
  replayPage: 100,
  // unsent bytes past which a replay waits for its consumer: enough to keep a reading consumer
  // busy, a sixty-fourth of what a live one may hold
  replayHighWaterBytes: 256 * 1024,
  // a hand-out waits this many times the CPU time the last one took: fanning out then takes at
  // most a fifth of the process's time, and the rest stays for the writes that make the events
  handOutGapFactor: 4,
  // but never longer than this after the last one: live events reach consumers this late at most
  handOutMaxGapMs: 100,
}

/** reconnecting the PostgreSQL wake-up channel (LISTEN) after its connection was lost */
export const WAKEUP_BACKOFF = {
  // a connection cut under a running database comes back at once: the first retry is that soon
  minMs: 100,
  // doubling stops here: meanwhile the firehose polls every pollMs, so waiting costs no events,
  // and a database back up is listened to again within five seconds
  maxMs: 5000,
}

/** asking relays to crawl (the quiet period itself is PDS_CRAWL_INTERVAL_MINUTES) */
// checked against CrawlerOptions where the crawlers are built
export const CRAWL_TUNING = {
  // a write is noticed this late at most; each look reads one max(seq)
  checkMs: 5000,
  // a relay that indexes this server reconnects within minutes of a restart; longer, it dropped us
  unwatchedMs: 5 * 60_000,
  // 1 + 2 + 4 + 8 s of backoff: a relay restarting is back within that
  attempts: 5,
  backoffMs: 1000,
  // a relay answers requestCrawl at once; ten seconds without an answer means it is down
  timeoutMs: 10_000,
}

/** the server's own periodic work */
export const JOBS = {
  // unreferenced blobs wait out PDS_BLOB_GRACE anyway: sweeping more often finds nothing new
  blobSweepMs: 10 * 60_000,
  // challenges live five minutes: a minute's expired ones are a few rows
  challengeSweepMs: 60_000,
  // one small file write; a floor half a minute behind the head is all a lost process costs
  seqFloorMs: 30_000,
  // expired events leave this often: retention is counted in hours, so minutes late is nothing
  eventPruneMs: 10 * 60_000,
  // events deleted per statement: each delete is short, so writers are never held up long
  eventPruneBatch: 1000,
  // blob rows per pass: each is one short transaction
  blobSweepBatch: 1000,
  // challenges deleted per statement, through the expiry index: short enough never to hold writers
  challengeSweepBatch: 500,
  // a scheduled backup starts at most this late, and one listing of the bucket is all a look costs
  backupCheckMaxMs: 10 * 60_000,
}

/** graceful stop: a supervisor allows 5 s before it kills the process */
export const SHUTDOWN = {
  // in-flight requests get this long before their connections are cut, so exit stays within 5 s
  drainMs: 4000,
  // keep-alive connections are closed as they turn idle, looked at this often
  idleSweepMs: 50,
  // a firehose subscriber that does not finish the close handshake within this is cut off
  wsCloseMs: 1000,
  // one stuck teardown step is given up after this, so the steps after it still run
  stepMs: 5000,
}

/** the store's own retries: each is bounded, and the last failure goes to the caller */
export const STORE_RETRY = {
  // a transaction whose connection was lost before COMMIT runs again on a fresh one; a third loss
  // in a row is a database going away, not a cut connection, and the caller hears of it
  transactAttempts: 3,
  // waited times the attempt between runs (25, then 50 ms): a pool opens a fresh connection in that
  transactBackoffMs: 25,
  // start-up's migration retries when another server's schema vanished under its introspection:
  // that server was dropping its schema, which is over within a few tries
  migrateAttempts: 5,
  // waited times the attempt between tries, so 200 ms in all at most
  migrateBackoffMs: 20,
}

/** PostgreSQL connections */
export const POSTGRES = {
  // per process, pg's own default: several processes share a server whose default
  // max_connections is 100, and one transaction holds one connection for milliseconds
  poolMax: 10,
}

/** SQLite connections: the writer, the read-only snapshots and the checkpoint worker */
export const SQLITE = {
  // a connection waits this long for another's lock before it fails with SQLITE_BUSY: far longer
  // than a write transaction or a checkpoint pass holds one
  busyTimeoutMs: 5000,
  // the writer's page cache, not better-sqlite3's 16 MiB: once filled it is never given back, and
  // a page beyond it costs a read from the kernel's file cache, not the disk
  writerCacheKiB: 4096,
  // a snapshot reads its pages once, in key order: a small cache is enough
  snapshotCacheKiB: 2048,
  // the checkpoint worker reads its pages once per checkpoint: a smaller one still
  checkpointCacheKiB: 1024,
  // snapshot connections kept open between snapshots; more than two exports at once is rare, and
  // one beyond them is opened for its snapshot rather than kept with its cache
  idleSnapshots: 2,
  // prepared statements kept on the writer: above the distinct texts a running server prepares
  // (a multi-row insert is one per row count), so the hot ones are prepared once
  statementCache: 500,
  // a log a burst of writes grew is cut back to this when it starts over
  journalSizeLimitBytes: 64 * 1024 * 1024,
}

/** copying the SQLite write-ahead log back into the database, on a worker thread (db/checkpointer.ts) */
export const CHECKPOINT = {
  // 1000 pages of 4 KiB: what SQLite's own automatic checkpoint waits for
  thresholdFrames: 1000,
  // a checkpoint runs this long after the commit that found the log long enough: a burst that
  // grew it (an import) has ended by then, and the idle collection has given the burst's memory
  // back before the thread starts, so the two do not add up to one peak
  delayMs: 2000,
  // the thread costs 16-18 MiB: a minute without a checkpoint and it ends, so a quiet server does
  // not hold it
  idleCloseMs: 60_000,
  // if the worker fails, the writer's COMMIT checkpoints by itself every ~16 MiB of log rather
  // than 4: pages consecutive commits rewrite (index roots, repo_root) are copied once, not four
  // times
  fallbackFrames: 4000,
}

/** giving memory back once the server command goes quiet (runtime.ts, reclaimWhenIdle) */
// checked against ReclaimOptions where it is used; typing it here would make an import cycle
export const RECLAIM = {
  // CPU use is sampled this often: one cheap timer, and a quiet spell is noticed within a second
  checkMs: 500,
  // two samples in a row under quietCpu: a pause between two requests is not a quiet spell
  quietChecks: 2,
  // under a twentieth of a core counts as quiet: a trickle of requests, no work in progress
  quietCpu: 0.05,
  // resident memory grown less than this since the last collection is not worth its synchronous
  // pause of 50-300 ms
  minGrowthBytes: 8 * 2 ** 20,
  // start-up's garbage (module loading, migrations) goes as soon as the server is up
  atStart: true,
  // the start-up collection runs by this check even when the process was never quiet: on a busy
  // machine the first quiet spell came seconds later, and until then the server held it
  startLatestCheck: 3,
}
