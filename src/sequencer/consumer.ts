// One subscribeRepos consumer: replay from `cursor`, then live. Each consumer has a bounded
// buffer; one that falls behind it while live is closed with ConsumerTooSlow instead of growing
// memory. While replaying, an overflowing buffer is simply dropped: the log still has it all.
import { ErrorFrame, MessageFrame } from '@atproto/xrpc-server'
import { encodeEvent, type EncodedEvent, type Firehose } from './firehose.js'

const PAGE = 500

/** an event already encoded once for every consumer */
class EncodedFrame extends MessageFrame {
  constructor(private bytes: Uint8Array) {
    super({})
  }
  toBytes() {
    return Buffer.from(this.bytes.buffer, this.bytes.byteOffset, this.bytes.byteLength)
  }
}

export async function* consume(hose: Firehose, cursor: number | undefined, signal: AbortSignal) {
  if (cursor !== undefined && !(Number.isSafeInteger(cursor) && cursor >= 0)) {
    yield new ErrorFrame({ error: 'InvalidRequest', message: 'cursor must be a non-negative integer' })
    return
  }
  const maxBuffer = hose.maxBuffer
  const queue: EncodedEvent[] = []
  let overflow = false
  let wake: (() => void) | undefined
  const unsubscribe = hose.subscribe((ev) => {
    if (queue.length >= maxBuffer) overflow = true
    else queue.push(ev)
    wake?.()
  }, () => queue.length)
  const onAbort = () => wake?.()
  signal.addEventListener('abort', onAbort)
  try {
    let last = -1
    // without a cursor the stream starts at the log's head now: the process's poller may not have
    // read events committed (by any process) before this subscription yet, and they are not live
    if (cursor === undefined) last = await hose.maxSeq()
    if (cursor !== undefined) {
      const newest = await hose.maxSeq()
      if (cursor > newest) {
        yield new ErrorFrame({ error: 'FutureCursor', message: 'Cursor in the future.' })
        return
      }
      const oldest = await hose.minSeq()
      last = cursor
      if (oldest !== undefined && cursor < oldest - 1) {
        yield new MessageFrame({ name: 'OutdatedCursor', message: 'Requested cursor exceeded limit. Possibly missing events' }, { type: '#info' })
        last = oldest - 1
      }
      for (;;) {
        const rows = await hose.rowsAfter(last, PAGE)
        for (const row of rows) {
          if (signal.aborted) return
          yield new EncodedFrame(encodeEvent(row).bytes)
          last = row.seq
        }
        if (rows.length === PAGE) continue
        if (!overflow) break
        overflow = false
        queue.length = 0
      }
    }
    for (;;) {
      if (signal.aborted) return
      if (overflow) {
        yield new ErrorFrame({ error: 'ConsumerTooSlow', message: 'Stream consumer too slow' })
        return
      }
      const ev = queue.shift()
      if (!ev) {
        await new Promise<void>((resolve) => (wake = resolve))
        wake = undefined
        continue
      }
      // the seam: an event both replayed and queued live is sent once
      if (ev.seq <= last) continue
      last = ev.seq
      yield new EncodedFrame(ev.bytes)
    }
  } finally {
    unsubscribe()
    signal.removeEventListener('abort', onAbort)
  }
}
