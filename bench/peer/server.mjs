// The reference PDS for `make bench-compare`: @atproto/pds (through @atproto/dev-env's TestPds)
// with dev-env's in-memory PLC in the same process, rate limits off, listening on loopback.
// Usage: node server.mjs --port <port> --data <dir> [--plc-port <port>]
// Prints `PLC <url>` (its PLC directory, for another server to share) and then `READY <url>` on
// stdout when it serves; every email it sends is printed as one line `MAIL <json>` ({template, to,
// params}, e.g. the plcOperation token), standing in for a mailbox. SIGTERM/SIGINT stop it.
import fs from 'node:fs/promises'
import path from 'node:path'
import { TestPds, TestPlc } from '@atproto/dev-env'

const args = process.argv.slice(2)
const arg = (name) => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : undefined
}
const port = Number(arg('--port'))
const data = arg('--data')
const plcPort = Number(arg('--plc-port')) || undefined
if (!port || !data) {
  process.stderr.write('usage: node server.mjs --port <port> --data <dir>\n')
  process.exit(2)
}

await fs.mkdir(path.join(data, 'pds'), { recursive: true })
// an explicit `port: undefined` would reach the PLC server's own config and make it listen on
// a random port other than the one its URL names
const plc = await TestPlc.create(plcPort ? { port: plcPort } : {})
const pds = await TestPds.create({
  port,
  hostname: 'localhost',
  didPlcUrl: plc.url,
  dataDirectory: path.join(data, 'pds'),
  blobstoreDiskLocation: path.join(data, 'blobs'),
  rateLimitsEnabled: false,
})
const mailer = pds.ctx.mailer
const sendTemplate = mailer.sendTemplate.bind(mailer)
mailer.sendTemplate = async (template, params, mailOpts) => {
  process.stdout.write(`MAIL ${JSON.stringify({ template, to: mailOpts?.to, params })}\n`)
  return sendTemplate(template, params, mailOpts)
}
process.stdout.write(`PLC ${plc.url}\n`)
process.stdout.write(`READY ${pds.url}\n`)

let stopping = false
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    if (stopping) return
    stopping = true
    setTimeout(() => process.exit(0), 3000).unref()
    Promise.allSettled([pds.close(), plc.close()]).then(() => process.exit(0))
  })
}
