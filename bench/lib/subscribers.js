#!/usr/bin/env node
// Firehose subscribers for `make bench-scale`. Each frame's receipt is timed on the machine-wide
// clock (performance.timeOrigin + now), so it can be set against the time a write was answered in
// another process. Run as a child process (many subscribers: reading frames then does not take the
// CPU of the process whose writers keep the commit rate) or imported (a few, in the writers'
// process, as a client next to its own writes would see them).
//
//   child of bench/scale.js: argv <ws url> <count>; IPC: 'ready', 'count' -> { frames },
//   { answered } -> { frames, lags }
import WebSocket from 'ws'

const REV = Buffer.from([0x63, 0x72, 0x65, 0x76])

export async function openSubscribers(url, count) {
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
  return {
    frames: () => frames,
    /** receipt minus answer, for every frame of an answered write; closes the subscribers */
    lags(answered) {
      const lags = []
      for (const [rev, times] of received) {
        const t = answered.get(rev)
        if (t !== undefined) for (const r of times) lags.push(r - t)
      }
      for (const ws of sockets) ws.terminate()
      return lags
    },
  }
}

if (process.send) {
  const subs = await openSubscribers(process.argv[2], Number(process.argv[3]))
  process.send('ready')
  process.on('message', (msg) => {
    if (msg === 'count') return process.send({ frames: subs.frames() })
    const lags = subs.lags(msg.answered)
    process.send({ frames: subs.frames(), lags: Float64Array.from(lags) }, () => process.exit(0))
  })
  // never outlive the bench
  setTimeout(() => process.exit(2), 10 * 60_000).unref()
  process.on('disconnect', () => process.exit(0))
}
