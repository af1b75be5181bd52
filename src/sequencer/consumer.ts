// One subscribeRepos consumer: replay from `cursor`, then live. Frames are written to the socket
// here rather than yielded one by one, so what the server holds for a consumer is measured where
// it sits (the socket's unsent bytes) and a consumer that stops reading cannot stall anything:
// - a replay takes one of a few backfill slots, reads the log a page at a time, lets other work
//   run between pages, and gives its slot up while it waits for the consumer to read; it leaves
//   out the events of accounts taken down now, their `#account` events aside;
// - frames are written to the connection under the WebSocket as the firehose built them, many in
//   one write: a group of the replay, or all live events of one hand-out in the one buffer every
//   consumer is given (a system call per frame and consumer was most of the cost of serving);
// - live events go straight to the socket; a consumer whose unsent backlog passes the limit, or a
//   replay that waits too long for the consumer to read, is sent ConsumerTooSlow and closed.
import { ErrorFrame, MessageFrame } from '@atproto/xrpc-server'
import type { Duplex } from 'node:stream'
import type { WebSocket } from 'ws'
import { encodeEvent, type EncodedEvent, type Firehose } from './firehose.js'
import type { Release } from './slots.js'
import { FIREHOSE_READS } from '../limits.js'

/** the close code xrpc-server ends a stream with after an error frame */
const POLICY = 1008

export async function* consume(
  hose: Firehose,
  cursor: number | undefined,
  signal: AbortSignal,
  ws: WebSocket | undefined,
  connection: Duplex | undefined,
) {
  if (cursor !== undefined && !(Number.isSafeInteger(cursor) && cursor >= 0)) {
    yield new ErrorFrame({ error: 'InvalidRequest', message: 'cursor must be a non-negative integer' })
    return
  }
  if (!ws || !connection) throw new Error('firehose stream without its socket')
  const limits = hose.limits
  const out = new Outbox(ws, connection)
  // live events that arrive while the log is replayed; past the limit they are dropped and the
  // replay reads them from the log instead
  const queue: EncodedEvent[] = []
  let overflow = false
  let live = false
  let last = -1
  let ended: (() => void) | undefined
  const end = new Promise<void>((resolve) => (ended = resolve))
  let tooSlow = false
  const dropSlow = () => {
    if (tooSlow) return
    tooSlow = true
    unsubscribe()
    // straight to the socket: the consumer may never read far enough for a yielded frame to go out
    ws.send(new ErrorFrame({ error: 'ConsumerTooSlow', message: 'Stream consumer too slow' }).toBytes(), { binary: true })
    ws.close(POLICY, 'ConsumerTooSlow')
    ended?.()
  }
  const unsubscribe = hose.subscribe(
    (evs, frames) => {
      if (!live) {
        for (const ev of evs) {
          if (queue.length >= limits.maxBuffer) overflow = true
          else queue.push(ev)
        }
        return
      }
      // the poller may hand out events this consumer already has (it can lag the log)
      let fresh = evs
      if (evs[0].seq <= last) {
        fresh = evs.filter((ev) => ev.seq > last)
        if (!fresh.length) return
        frames = Buffer.concat(fresh.map((ev) => ev.frame))
      }
      if (out.pending + fresh.length > limits.maxBuffer || ws.bufferedAmount + frames.length > limits.maxBacklogBytes) return dropSlow()
      last = fresh[fresh.length - 1].seq
      out.write(frames, fresh.length)
    },
    () => out.pending + queue.length,
  )
  const onAbort = () => ended?.()
  signal.addEventListener('abort', onAbort)
  let slot: Release | undefined
  const gone = () => signal.aborted || tooSlow || ws.readyState !== ws.OPEN
  /** false when the consumer is gone, or was too slow to read what the replay sent it */
  const backPressure = async () => {
    if (ws.bufferedAmount <= FIREHOSE_READS.replayHighWaterBytes) return true
    // nothing to do until the consumer reads: someone else may replay meanwhile
    slot?.()
    slot = undefined
    if (await out.drained(limits.stallMs, signal)) return true
    if (!signal.aborted) dropSlow()
    return false
  }
  try {
    // without a cursor the stream starts at the log's head now: the process's poller may not have
    // read events committed (by any process) before this subscription yet, and they are not live
    let fromLog = cursor !== undefined
    if (cursor === undefined) last = await hose.maxSeq()
    else {
      const newest = await hose.maxSeq()
      if (cursor > newest) {
        yield new ErrorFrame({ error: 'FutureCursor', message: 'Cursor in the future.' })
        return
      }
      if (!(slot = await hose.backfills.acquire(signal))) return
      const oldest = await hose.minSeq()
      last = cursor
      if (oldest !== undefined && cursor < oldest - 1) {
        out.send(
          new MessageFrame(
            { name: 'OutdatedCursor', message: 'Requested cursor exceeded limit. Possibly missing events' },
            { type: '#info' },
          ).toBytes(),
        )
        last = oldest - 1
      }
    }
    for (;;) {
      while (fromLog) {
        if (!slot && !(slot = await hose.backfills.acquire(signal))) return
        const rows = await hose.rowsAfter(last, FIREHOSE_READS.replayPage, { replay: true })
        for (let i = 0; i < rows.length;) {
          if (gone()) return
          // as many frames as the high-water mark allows leave in one write (at least one: a
          // socket that reports unsent bytes but nothing pending is closing, and the page must end)
          const group: Buffer[] = []
          let bytes = ws.bufferedAmount
          do {
            const ev = encodeEvent(rows[i++])
            group.push(ev.frame)
            bytes += ev.frame.length
            last = ev.seq
          } while (i < rows.length && bytes <= FIREHOSE_READS.replayHighWaterBytes)
          out.writeMany(group)
          if (ws.bufferedAmount > FIREHOSE_READS.replayHighWaterBytes && !(await backPressure())) return
        }
        if (rows.length === FIREHOSE_READS.replayPage) {
          // let requests and other consumers run between pages
          await new Promise((resolve) => setImmediate(resolve))
          continue
        }
        fromLog = overflow
        overflow = false
        if (fromLog) queue.length = 0
      }
      // the live events queued meanwhile; the switch to live happens with the queue empty and
      // nothing awaited in between, so no event is lost or sent twice at the seam
      while (queue.length && !overflow) {
        if (gone()) return
        const group: Buffer[] = []
        let bytes = ws.bufferedAmount
        do {
          const ev = queue.shift()!
          if (ev.seq <= last) continue
          group.push(ev.frame)
          bytes += ev.frame.length
          last = ev.seq
        } while (queue.length && bytes <= FIREHOSE_READS.replayHighWaterBytes)
        out.writeMany(group)
        if (ws.bufferedAmount > FIREHOSE_READS.replayHighWaterBytes && !(await backPressure())) return
      }
      if (!overflow) break
      // some were dropped: they are in the log
      overflow = false
      queue.length = 0
      fromLog = true
    }
    slot?.()
    slot = undefined
    live = true
    await end
  } finally {
    slot?.()
    unsubscribe()
    signal.removeEventListener('abort', onAbort)
  }
}

/**
 * the consumer's socket, and how many frames it has been handed that it has not written out.
 * Whole frames go straight to the connection under the WebSocket, which writes there itself only
 * for control frames (each whole, in one call): frames never interleave, and the socket's unsent
 * bytes (`bufferedAmount`) count them as its own.
 */
class Outbox {
  pending = 0
  private idle: (() => void) | undefined

  constructor(
    private ws: WebSocket,
    private connection: Duplex,
  ) {}

  /** a message the WebSocket frames itself */
  send(bytes: Uint8Array) {
    this.pending++
    this.ws.send(bytes, { binary: true }, () => this.written(1))
  }

  /** `count` whole frames, one after another in `frames` */
  write(frames: Buffer, count: number) {
    this.pending += count
    this.connection.write(frames, () => this.written(count))
  }

  /** whole frames, in one write */
  writeMany(frames: Buffer[]) {
    if (!frames.length) return
    this.pending += frames.length
    this.connection.cork()
    for (let i = 0; i < frames.length - 1; i++) this.connection.write(frames[i])
    this.connection.write(frames[frames.length - 1], () => this.written(frames.length))
    this.connection.uncork()
  }

  private written(count: number) {
    this.pending -= count
    if (this.pending === 0) this.idle?.()
  }

  /** true once everything sent so far is written out; false after `ms`, or on abort */
  drained(ms: number, signal: AbortSignal): Promise<boolean> {
    if (this.pending === 0) return Promise.resolve(true)
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer)
        signal.removeEventListener('abort', onAbort)
        this.idle = undefined
        resolve(ok)
      }
      const onAbort = () => done(false)
      const timer = setTimeout(() => done(false), ms)
      signal.addEventListener('abort', onAbort, { once: true })
      this.idle = () => done(true)
    })
  }
}
