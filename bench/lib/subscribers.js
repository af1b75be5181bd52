#!/usr/bin/env node
// Firehose subscribers for `make bench-scale`, in a process of their own so that reading frames
// does not take the CPU of the process whose writers keep the commit rate. Each frame's receipt
// is timed on the machine-wide clock (performance.timeOrigin + now) so the parent can set it
// against the time its write was answered.
//
//   child of bench/scale.js: argv <ws url> <count>; IPC: 'ready', then { answered } -> { frames, lags }
import WebSocket from 'ws'

const [url, count] = [process.argv[2], Number(process.argv[3])]
const REV = Buffer.from([0x63, 0x72, 0x65, 0x76])
const received = new Map()
let frames = 0
const sockets = []
for (let i = 0; i < count; i++) {
  const ws = new WebSocket(url)
  await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)))
  ws.on('message', (buf) => {
    const now = performance.timeOrigin + performance.now()
    frames++
    // the commit's rev, found without decoding: the body's first "rev" key is the top-level one
    const at = buf.indexOf(REV)
    if (at < 0) return
    const rev = buf.toString('latin1', at + 5, at + 18)
    const list = received.get(rev)
    if (list) list.push(now)
    else received.set(rev, [now])
  })
  sockets.push(ws)
}
process.send('ready')
process.on('message', (msg) => {
  if (msg === 'count') return process.send({ frames })
  const lags = []
  for (const [rev, times] of received) {
    const t = msg.answered.get(rev)
    if (t !== undefined) for (const r of times) lags.push(r - t)
  }
  for (const ws of sockets) ws.terminate()
  process.send({ frames, lags: Float64Array.from(lags) }, () => process.exit(0))
})
// never outlive the bench
setTimeout(() => process.exit(2), 10 * 60_000).unref()
process.on('disconnect', () => process.exit(0))
