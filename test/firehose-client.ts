// A firehose consumer as relays write them: a WebSocket and a DAG-CBOR decoder, nothing more.
import { decodeAll } from '@atproto/lex-cbor'
import WebSocket from 'ws'

export type Frame = { op: number; t?: string; body: any }

export type Consumer = {
  frames: Frame[]
  ws: WebSocket
  closed: Promise<{ code: number; reason: string }>
  /** resolves once `pred` holds for the frames received so far (bounded by `ms`) */
  until(pred: (frames: Frame[]) => boolean, ms?: number): Promise<Frame[]>
  close(): void
}

export function subscribe(url: string, cursor?: number): Promise<Consumer> {
  const qs = cursor === undefined ? '' : `?cursor=${cursor}`
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/xrpc/com.atproto.sync.subscribeRepos${qs}`)
  const frames: Frame[] = []
  const waiters = new Set<() => void>()
  ws.on('message', (data: Buffer) => {
    const [header, body] = [...decodeAll(new Uint8Array(data))] as [any, any]
    frames.push({ op: header.op, t: header.t, body })
    for (const w of waiters) w()
  })
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => {
      resolve({ code, reason: reason.toString() })
      for (const w of waiters) w()
    }),
  )
  const until = (pred: (f: Frame[]) => boolean, ms = 10_000) =>
    new Promise<Frame[]>((resolve, reject) => {
      const check = () => {
        if (pred(frames)) {
          waiters.delete(check)
          clearTimeout(timer)
          resolve(frames)
        }
      }
      const timer = setTimeout(() => {
        waiters.delete(check)
        reject(new Error(`firehose condition not met within ${ms} ms; got ${frames.length} frames`))
      }, ms)
      waiters.add(check)
      check()
    })
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ frames, ws, closed, until, close: () => ws.close() }))
    ws.once('error', reject)
  })
}

export const seqs = (frames: Frame[]) => frames.filter((f) => f.op === 1 && typeof f.body.seq === 'number').map((f) => f.body.seq as number)
