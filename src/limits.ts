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
