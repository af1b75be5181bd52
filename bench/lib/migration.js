// The whole account-migration flow with a key the destination reserves (requestAccountMigrate to
// activateAccount, ten steps) between two servers of ours on two loopback ports sharing one PLC
// directory (@did-plc/server in this process, in memory) and one mail sink (for the PLC-operation
// email token). Setup (unmeasured): an account on the origin with `records` records and `blobs`
// blobs of 100 KiB (blob i referenced by record i). Measured: the wall time of steps 1-10, with
// each step's share.
import { createServer } from 'node:http'
import { createRequire } from 'node:module'
import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { request } from 'undici'
import { startOurs } from './servers.js'
import { Xrpc } from './xrpc.js'
import { cpuMs } from './proc.js'

const PASSWORD = 'bench-password-0123456789'
const COLLECTION = 'com.example.post'

async function startMailSink() {
  const received = []
  const server = createServer((req, res) => {
    let data = ''
    req.on('data', (c) => (data += c))
    req.on('end', () => {
      try {
        received.push(JSON.parse(data))
      } catch {}
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('{"ok":true}')
    })
  })
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  return {
    url: `http://127.0.0.1:${server.address().port}/send`,
    async tokenFor(to, after, ms = 10_000) {
      const until = Date.now() + ms
      for (;;) {
        const msg = received
          .slice(after)
          .reverse()
          .find((m) => (m.to ?? m.To) === to)
        const line =
          msg &&
          String(msg.text ?? msg.TextBody ?? '')
            .split('\n')
            .find((l) => /^[A-Z2-7]{32}$/.test(l))
        if (line) return line
        if (Date.now() > until) throw new Error(`no token mailed to ${to} within ${ms} ms`)
        await new Promise((r) => setTimeout(r, 20))
      }
    },
    get count() {
      return received.length
    },
    close: () => new Promise((r) => (server.closeAllConnections(), server.close(r))),
  }
}

async function fetchRaw(url, headers) {
  const res = await request(url, { headers, headersTimeout: 120_000, bodyTimeout: 120_000 })
  const bytes = Buffer.from(await res.body.arrayBuffer())
  if (res.statusCode !== 200) throw new Error(`GET ${url} answered ${res.statusCode}: ${bytes.toString().slice(0, 200)}`)
  return { bytes, contentType: String(res.headers['content-type'] ?? 'application/octet-stream') }
}

/** returns a scenario result (as runScenario does) */
export async function runMigrationFlow({ db, records, blobs, log = () => {} }) {
  const base = {
    key: 'migration',
    scenario: `migration flow, ${records.toLocaleString('en')} records + ${blobs} blobs of 100 KiB`,
    metric: 's',
    server: `ours-${db}`,
  }
  const { PlcServer, Database } = createRequire(import.meta.url)('@did-plc/server')
  const plc = PlcServer.create({ db: Database.mock(), port: 0 })
  const plcUrl = `http://127.0.0.1:${(await plc.start()).address().port}`
  const sink = await startMailSink()
  const mail = {
    PDS_DID_PLC_URL: plcUrl,
    PDS_EMAIL_BACKEND: 'http-json',
    PDS_EMAIL_HTTP_URL: sink.url,
    PDS_EMAIL_HTTP_TOKEN: 'bench-sink',
    PDS_EMAIL_FROM: 'pds@example.com',
  }
  const servers = []
  const clients = []
  try {
    const origin = await startOurs({ db, label: `ours-${db}-origin`, env: () => mail })
    servers.push(origin)
    const dest = await startOurs({
      db,
      label: `ours-${db}-destination`,
      env: (port) => ({ ...mail, PDS_HOSTNAME: 'pds2.localhost', PDS_PUBLIC_URL: `http://localhost:${port}` }),
    })
    servers.push(dest)
    const o = new Xrpc(origin.url)
    const d = new Xrpc(dest.url)
    clients.push(o, d)

    // setup: the account on the origin
    const handle = `mover${randomBytes(3).toString('hex')}.test`
    const email = `${handle}@example.com`
    const acct = await o.call('com.atproto.server.createAccount', { body: { handle, email, password: PASSWORD } })
    const did = acct.did
    log(`    setup: ${blobs} blobs, ${records} records on ${did}`)
    const refs = []
    for (let i = 0; i < blobs; i++) {
      const out = await o.call('com.atproto.repo.uploadBlob', {
        token: acct.accessJwt,
        body: randomBytes(100 * 1024),
        encoding: 'image/jpeg',
      })
      refs.push(out.blob)
    }
    for (let done = 0; done < records;) {
      const writes = []
      for (let k = 0; k < 200 && done < records; k++, done++) {
        const value = { $type: COLLECTION, text: `post ${done}`, n: done }
        if (done < blobs) value.image = refs[done]
        writes.push({
          $type: 'com.atproto.repo.applyWrites#create',
          collection: COLLECTION,
          rkey: `r${String(done).padStart(6, '0')}`,
          value,
        })
      }
      await o.call('com.atproto.repo.applyWrites', { token: acct.accessJwt, body: { repo: did, writes } })
    }

    // measured: the ten steps
    const steps = {}
    const t0 = performance.now()
    const cpu0 = cpuMs(origin.pid) + cpuMs(dest.pid)
    let last = t0
    const step = (name) => {
      const now = performance.now()
      steps[name] = now - last
      last = now
    }
    const login = await o.call('com.atproto.server.createSession', { body: { identifier: handle, password: PASSWORD } })
    const jwt = login.accessJwt
    const migrate = await o.call('com.atproto.server.requestAccountMigrate', { token: jwt, body: { to: dest.url } })
    const migrationToken = migrate.token
    const reserved = await d.call('com.atproto.server.reserveSigningKey', { body: { did } })
    step('login+migrate+reserve')
    const before = sink.count
    await o.call('com.atproto.identity.requestPlcOperationSignature', { token: jwt, post: true })
    const emailToken = await sink.tokenFor(email, before)
    const signed = await o.call('com.atproto.identity.signPlcOperation', {
      token: jwt,
      body: {
        token: emailToken,
        verificationMethods: { atproto: `did:key:${reserved.signingKey}` },
        services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: dest.publicUrl } },
      },
    })
    const joined = await d.call('com.atproto.server.createAccount', {
      body: { handle, email, password: PASSWORD, did, plcOp: signed.operation },
    })
    const destJwt = joined.accessJwt
    step('plc op+createAccount')
    const car = await fetchRaw(`${origin.url}/xrpc/com.atproto.sync.getRepo?did=${did}`, { authorization: `Bearer ${migrationToken}` })
    step('getRepo')
    await d.call('com.atproto.repo.importRepo', { token: destJwt, body: car.bytes, encoding: 'application/vnd.ipld.car' })
    step('importRepo')
    let moved = 0
    for (let rounds = 0; rounds <= blobs; rounds++) {
      const page = await d.call('com.atproto.sync.listMissingBlobs', { token: destJwt, params: { limit: 100 } })
      if (!page.blobs.length) break
      for (const cid of new Set(page.blobs.map((b) => b.cid))) {
        const blob = await fetchRaw(`${origin.url}/xrpc/com.atproto.sync.getBlob?did=${did}&cid=${cid}`, {
          authorization: `Bearer ${migrationToken}`,
        })
        await d.call('com.atproto.repo.uploadBlob', { token: destJwt, body: blob.bytes, encoding: blob.contentType })
        moved++
      }
    }
    step('blobs')
    await d.call('com.atproto.server.activateAccount', { token: destJwt, post: true })
    step('activate')
    const wallMs = performance.now() - t0
    const cpu = cpuMs(origin.pid) + cpuMs(dest.pid) - cpu0
    const status = await d.call('com.atproto.server.checkAccountStatus', { token: destJwt })
    if (!status.active || status.indexedRecords !== records || status.importedBlobs !== blobs || moved !== blobs) {
      throw new Error(`incomplete migration: ${JSON.stringify(status)}, ${moved} blobs moved`)
    }
    const stepsNote = Object.entries(steps)
      .map(([k, v]) => `${k} ${(v / 1000).toFixed(2)} s`)
      .join(', ')
    return {
      ...base,
      status: 'ok',
      ops: 1,
      errors: 0,
      seconds: wallMs / 1000,
      value: wallMs / 1000,
      reqPerS: NaN,
      p50: wallMs,
      p99: wallMs,
      cpuMs: cpu,
      cpuMsPerOp: cpu,
      note: `wall ${(wallMs / 1000).toFixed(2)} s (${stepsNote}); CAR ${(car.bytes.length / 1e6).toFixed(2)} MB; CPU = both servers`,
    }
  } catch (err) {
    return { ...base, status: 'failed', note: err.message }
  } finally {
    for (const c of clients) await c.close().catch(() => {})
    for (const s of servers) await s.stop().catch(() => {})
    await sink.close()
    await plc.destroy().catch(() => {})
  }
}
