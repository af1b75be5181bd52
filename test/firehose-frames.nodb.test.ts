// A firehose frame's body is the stored body with seq and time written in at their places: the
// bytes must be what decoding the body and encoding it again with both would give.
import * as dagCbor from '@ipld/dag-cbor'
import { encode } from '@atproto/lex-cbor'
import { expect, it } from 'vitest'
import { commitBody } from '../src/repo/events.js'
import { cidForDagCbor } from '../src/encoding/node-cbor.js'
import { spliceSeqAndTime, withSeqAndTime } from '../src/sequencer/splice.js'
import { encodeEvent } from '../src/sequencer/firehose.js'
import { WebSocket, WebSocketServer } from 'ws'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe } from './harness.js'

const DID = 'did:plc:abcdefghijklmnopqrstuvwx'
const cid = (i: number) => cidForDagCbor(encode({ i }))
const TIME = '2026-11-24T08:00:00.000Z'

describe('firehose frame bodies', () => {
  it('adds seq and time to every kind of stored body exactly as decode and encode would', () => {
    const commit = (prevData: boolean, ops: number) =>
      commitBody(
        {
          did: DID,
          rev: '3l2abd',
          since: prevData ? '3l2abc' : null,
          commit: cid(1),
          blocks: undefined as never,
          ops: Array.from({ length: ops }, (_, i) => ({ action: 'create' as const, path: `com.example.a/r${i}`, cid: cid(10 + i) })),
          prevData: prevData ? cid(2) : null,
        },
        new Uint8Array(5000).fill(3),
      )
    const bodies: Uint8Array[] = [
      commit(true, 1),
      commit(false, 0),
      commit(true, 200),
      dagCbor.encode({ did: DID, rev: '3l2abc', blocks: new Uint8Array(100) }),
      dagCbor.encode({ did: DID, handle: 'alice.test' }),
      dagCbor.encode({ did: DID }),
      dagCbor.encode({ did: DID, active: false, status: 'takendown' }),
      dagCbor.encode({ did: DID, handle: 'ünïcode.test', nested: { a: [1, -2, 3.5, null, true, { x: 'y' }], big: 2 ** 40 } }),
      dagCbor.encode({ a: 1, sea: 2, seqq: 3, tima: 4, timf: 5, zzzzz: 6 }),
      dagCbor.encode(Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`k${i}`, i]))),
    ]
    for (const body of bodies) {
      for (const seq of [0, 23, 24, 255, 256, 65_536, 2 ** 32 + 5]) {
        const expected = dagCbor.encode({ ...dagCbor.decode<Record<string, unknown>>(body), seq, time: TIME })
        expect(Buffer.from(withSeqAndTime(body, seq, TIME)).equals(Buffer.from(expected))).toBe(true)
        // and without decoding
        expect(spliceSeqAndTime(body, seq, TIME)).toBeDefined()
      }
    }
    // a body already holding seq falls back to decoding (and the later value wins, as before)
    const has = dagCbor.encode({ did: DID, seq: 1 })
    expect(spliceSeqAndTime(has, 2, TIME)).toBeUndefined()
    expect(dagCbor.decode(withSeqAndTime(has, 2, TIME))).toEqual({ did: DID, seq: 2, time: TIME })
  })
})

describe('firehose WebSocket frames', () => {
  it('frames every event so a WebSocket client reads exactly the message, across the length encodings', async () => {
    // a server that writes the frames straight to the upgraded connection, as the firehose does
    const sent: Buffer[] = []
    const wss = new WebSocketServer({ noServer: true })
    const http = createServer()
    http.on('upgrade', (req, socket, head) => wss.handleUpgrade(req, socket, head, () => sent.forEach((f) => socket.write(f))))
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
    try {
      const row = (pad: number) => ({
        seq: 7,
        type: 'identity',
        payload: dagCbor.encode({ did: DID, pad: 'x'.repeat(pad) }),
        sequenced_at: TIME,
      })
      // the message length for pad 0; each pad byte adds one (past the few where the text head grows)
      const base = encodeEvent(row(0)).bytes.length
      const events = [0, 1, 125, 126, 127, 65535, 65536, 65537, 70000].map((want) => {
        let pad = Math.max(0, want - base)
        while (pad > 0 && encodeEvent(row(pad)).bytes.length > want) pad--
        return { pad, ev: encodeEvent(row(pad)) }
      })
      sent.push(...events.map((e) => e.ev.frame))
      const { port } = http.address() as AddressInfo
      const ws = new WebSocket(`ws://127.0.0.1:${port}/`)
      const got = await new Promise<Buffer[]>((resolve, reject) => {
        const out: Buffer[] = []
        ws.on('message', (data: Buffer, binary: boolean) => {
          if (!binary) reject(new Error('text frame'))
          out.push(data)
          if (out.length === events.length) resolve(out)
        })
        ws.on('error', reject)
        setTimeout(() => reject(new Error(`${out.length} of ${events.length} frames`)), 5000)
      })
      ws.terminate()
      const header = dagCbor.encode({ op: 1, t: '#identity' }).length
      events.forEach(({ pad, ev }, i) => {
        expect(Buffer.compare(got[i], Buffer.from(ev.bytes))).toBe(0)
        expect(dagCbor.decode(got[i].subarray(header))).toEqual({ did: DID, pad: 'x'.repeat(pad), seq: 7, time: TIME })
      })
    } finally {
      wss.close()
      http.closeAllConnections()
      await new Promise((resolve) => http.close(resolve))
    }
  })
})
