// Serves the durable event log to subscribeRepos consumers. One poller per process reads new rows
// in seq order and hands each event, encoded once, to every live consumer; a consumer with a cursor
// replays from the log first and joins the live stream at the seam without a gap or a duplicate.
import * as dagCbor from '@ipld/dag-cbor'
import { sql } from 'kysely'
import type { Db } from '../db/index.js'
import type { Logger } from '../logger.js'
import { StreamAdmission } from './admission.js'
import { Slots } from './slots.js'
import { seqAndTimeParts } from './splice.js'
import { FIREHOSE_READS, JOBS } from '../limits.js'

/**
 * `bytes` is the subscribeRepos message; `frame` the same bytes behind the WebSocket header of a
 * final unmasked binary frame (the one a server sends), in one buffer: the frame is built once and
 * written as it is to every consumer's connection
 */
export type EncodedEvent = { seq: number; bytes: Uint8Array; frame: Buffer }

type Row = { seq: number; type: string; payload: Uint8Array; sequenced_at: string }

const headers = new Map<string, Uint8Array>()

/** frame bytes of one event: the DAG-CBOR header `{op: 1, t: '#<type>'}` then the body */
export function encodeEvent(row: Row): EncodedEvent {
  let header = headers.get(row.type)
  if (!header) headers.set(row.type, (header = dagCbor.encode({ op: 1, t: `#${row.type}` })))
  const parts = seqAndTimeParts(row.payload, row.seq, row.sequenced_at)
  let length = header.length
  for (const p of parts) length += p.length
  const ws = wsHeader(length)
  const frame = Buffer.allocUnsafe(ws.length + length)
  frame.set(ws, 0)
  let at = ws.length
  frame.set(header, at)
  at += header.length
  for (const p of parts) {
    frame.set(p, at)
    at += p.length
  }
  return { seq: row.seq, bytes: frame.subarray(ws.length), frame }
}

/** FIN and the binary opcode, then the payload length in 7, 16 or 64 bits (RFC 6455 §5.2) */
function wsHeader(length: number): Uint8Array {
  if (length < 126) return Uint8Array.of(0x82, length)
  if (length < 0x10000) return Uint8Array.of(0x82, 126, length >> 8, length & 0xff)
  const h = Buffer.alloc(10)
  h[0] = 0x82
  h[1] = 127
  h.writeBigUInt64BE(BigInt(length), 2)
  return h
}

export type FirehoseOptions = {
  /** how often the log is read while consumers exist and no wake-up channel is healthy */
  pollMs: number
  /** with a healthy wake-up channel (PostgreSQL LISTEN), the log is still read this often, as a safety net */
  safetyPollMs: number
  retentionHours: number
  /** events a live consumer may have unsent before it is dropped */
  maxBuffer: number
  /** unsent bytes a live consumer may hold before it is dropped */
  maxBacklogBytes: number
  /** how long a replay waits for its consumer to read before dropping it */
  stallMs: number
  /** consumers replaying the log at once; the others wait their turn */
  maxBackfills: number
  /** open streams per client address */
  maxConnectionsPerAddress: number
}

export type ConsumerLimits = Pick<FirehoseOptions, 'maxBuffer' | 'maxBacklogBytes' | 'stallMs'>

/**
 * the events of one hand-out, in seq order, and their frames one after another in one buffer: a
 * consumer that takes them all writes that buffer to its connection in one call
 */
export type Listener = (evs: EncodedEvent[], frames: Buffer) => void

export class Firehose {
  private listeners = new Map<Listener, () => number>()
  private lastSeq: number | undefined
  private polling: Promise<void> | undefined
  private again = false
  private timer: NodeJS.Timeout | undefined
  private pruneTimer: NodeJS.Timeout | undefined
  private wakeupHealthy = false
  private lastPollAt = 0
  /** events read or handed over since the last hand-out to the listeners */
  private outgoing: EncodedEvent[] = []
  private flushing: (() => void) | undefined
  /** a hand-out waits until then: see handOut */
  private nextFlushAt = 0
  readonly backfills: Slots
  readonly admission: StreamAdmission

  constructor(
    private db: Db,
    private logger: Logger,
    private opts: FirehoseOptions,
  ) {
    this.backfills = new Slots(opts.maxBackfills)
    this.admission = new StreamAdmission(opts.maxConnectionsPerAddress)
  }

  get limits(): ConsumerLimits {
    return this.opts
  }

  async start() {
    // from here on every committed event reaches the live consumers
    this.lastSeq = await this.maxSeq()
    this.timer = setInterval(() => {
      if (!this.listeners.size) return
      if (this.wakeupHealthy && Date.now() - this.lastPollAt < this.opts.safetyPollMs) return
      this.notify()
    }, this.opts.pollMs)
    this.timer.unref()
    const prune = () => this.prune().catch((err) => this.logger.error({ err }, 'firehose prune failed'))
    this.pruneTimer = setInterval(prune, JOBS.eventPruneMs)
    this.pruneTimer.unref()
    void prune()
  }

  async stop() {
    clearInterval(this.timer)
    clearInterval(this.pruneTimer)
    this.flushing?.()
    this.flushing = undefined
    this.outgoing = []
    this.listeners.clear()
    await this.polling
  }

  /** a write committed: read the log now (also called on a timer while anyone listens) */
  notify() {
    if (this.polling) {
      this.again = true
      return
    }
    this.polling = this.poll()
      .catch((err) => this.logger.error({ err }, 'firehose poll failed'))
      .finally(() => {
        this.polling = undefined
        if (this.again) {
          this.again = false
          this.notify()
        }
      })
  }

  /**
   * events this process committed, in seq order, durable already: sent at once when they follow
   * the last one sent, else the log is read (another process's events, or a poll in flight)
   */
  deliverLocal(rows: Row[]) {
    if (this.lastSeq === undefined) return
    for (const row of rows) {
      if (row.seq <= this.lastSeq) continue
      if (this.polling || row.seq !== this.lastSeq + 1) return this.notify()
      this.lastSeq = row.seq
      this.handOut(row)
    }
  }

  /**
   * Events reach the listeners in hand-outs, all that arrived since the last one together: each
   * consumer then writes them to its connection in one system call, and with many consumers that
   * call is most of what serving costs. A hand-out runs once the work in progress is done (all
   * the commits one fsync made durable, before any other request), but never sooner after the
   * last one than FIREHOSE_READS.handOutGapFactor times what that one took: fanning out takes a bounded share
   * of the process's time, whatever the number of consumers, and the more consumers, the more
   * events share each write. With few consumers a hand-out takes microseconds, and so does the
   * wait.
   */
  private handOut(row: Row) {
    if (!this.listeners.size) return
    this.outgoing.push(encodeEvent(row))
    if (this.flushing) return
    const wait = this.nextFlushAt - performance.now()
    if (wait > 0) {
      const t = setTimeout(this.flush, wait)
      this.flushing = () => clearTimeout(t)
    } else {
      process.nextTick(this.flush)
      this.flushing = () => {}
    }
  }

  private flush = () => {
    this.flushing = undefined
    // stopped meanwhile
    if (!this.outgoing.length) return
    const evs = this.outgoing
    this.outgoing = []
    const started = process.cpuUsage()
    const frames = evs.length === 1 ? evs[0].frame : Buffer.concat(evs.map((ev) => ev.frame))
    for (const fn of this.listeners.keys()) fn(evs, frames)
    // CPU time, not wall time: a process the machine did not run meanwhile has nothing to make up
    const { user, system } = process.cpuUsage(started)
    this.nextFlushAt =
      performance.now() + Math.min(FIREHOSE_READS.handOutMaxGapMs, (FIREHOSE_READS.handOutGapFactor * (user + system)) / 1000)
  }

  /**
   * another process (or this one) committed an event: the cross-process wake-up calls this. Only
   * consumers need the read; without any, the next subscriber's first poll catches up.
   */
  wake() {
    if (this.listeners.size) this.notify()
  }

  /** while a wake-up channel is healthy the timer only polls as a safety net */
  setWakeupHealthy(healthy: boolean) {
    this.wakeupHealthy = healthy
  }

  /** `backlog` tells metrics how many events the listener holds unsent */
  subscribe(fn: Listener, backlog: () => number = () => 0): () => void {
    this.listeners.set(fn, backlog)
    return () => this.listeners.delete(fn)
  }

  /** live consumers, and the largest number of events any of them has not sent yet */
  stats(): { consumers: number; maxBacklog: number } {
    let maxBacklog = 0
    for (const backlog of this.listeners.values()) maxBacklog = Math.max(maxBacklog, backlog())
    return { consumers: this.listeners.size, maxBacklog }
  }

  /** the newest seq the live stream has handed out */
  get headSeq(): number {
    return this.lastSeq ?? 0
  }

  private async poll() {
    this.lastPollAt = Date.now()
    for (;;) {
      const rows = await this.rowsAfter(this.lastSeq ?? 0, FIREHOSE_READS.livePage)
      for (const row of rows) {
        // handed over in-process meanwhile (deliverLocal)
        if (row.seq <= (this.lastSeq ?? 0)) continue
        this.lastSeq = row.seq
        this.handOut(row)
      }
      if (rows.length < FIREHOSE_READS.livePage) return
      // let consumers drain between pages, so a backlog does not arrive as one burst
      await new Promise((resolve) => setImmediate(resolve))
    }
  }

  async rowsAfter(seq: number, limit: number, opts: { replay?: boolean } = {}): Promise<Row[]> {
    const rows = await this.db
      .selectFrom('event')
      .select(['seq', 'type', 'payload', 'sequenced_at'])
      .where('seq', '>', seq)
      // a replay leaves out the events of accounts taken down now but their `#account` ones, as
      // relays drop them: a consumer catching up never gets what is no longer served, and learns
      // that the account is taken down (the literal lets SQLite use the partial index)
      .$if(!!opts.replay, (q) =>
        q.where((eb) =>
          eb.or([
            eb('type', '=', 'account'),
            eb(
              'did',
              'not in',
              eb
                .selectFrom('account')
                .select('did')
                .where(sql<boolean>`status = 'takendown'`),
            ),
          ]),
        ),
      )
      .orderBy('seq')
      .limit(limit)
      .execute()
    // a row is visible once committed, before its writer is acknowledged: relays keep what they
    // are sent, so send nothing a power loss could still take back
    if (rows.length) await this.db.durable()
    return rows
  }

  async maxSeq(): Promise<number> {
    const r = await this.db
      .selectFrom('event')
      .select(sql<number | null>`max(seq)`.as('seq'))
      .executeTakeFirst()
    return Number(r?.seq ?? 0)
  }

  async minSeq(): Promise<number | undefined> {
    const r = await this.db
      .selectFrom('event')
      .select(sql<number | null>`min(seq)`.as('seq'))
      .executeTakeFirst()
    return r?.seq == null ? undefined : Number(r.seq)
  }

  /**
   * drops events older than the retention window, in batches so writers are never held up long;
   * the newest event is always kept, so the log's max seq survives and cursors stay comparable
   */
  async prune(now = Date.now()): Promise<number> {
    const cutoff = new Date(now - this.opts.retentionHours * 3600_000).toISOString()
    const newest = await this.maxSeq()
    let total = 0
    for (;;) {
      // along the time index: ordered by seq, the store walked every event younger than the
      // cutoff to find none older (the whole log at start-up, hundreds of MB on a large host)
      const batch = await this.db
        .selectFrom('event')
        .select('seq')
        .where('sequenced_at', '<', cutoff)
        .where('seq', '<', newest)
        .orderBy('sequenced_at')
        .limit(JOBS.eventPruneBatch)
        .execute()
      if (!batch.length) return total
      await this.db
        .deleteFrom('event')
        .where(
          'seq',
          'in',
          batch.map((b) => b.seq),
        )
        .execute()
      total += batch.length
    }
  }
}
