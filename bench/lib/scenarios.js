// The scenarios: each drives a server only through the standard com.atproto API, on accounts
// the bench creates itself. A scenario whose method answers 501 MethodNotImplemented is "n/a"
// for that server (reported, not an error).
import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { cpuMs, machineCpu, memory } from './proc.js'
import { percentile, runLoad } from './load.js'
import { Xrpc, XrpcError, isNotImplemented } from './xrpc.js'
import { OAuthUnavailable, ath, oauthSession } from './oauth.js'

const PASSWORD = 'bench-password-0123456789'
const POST = 'app.bsky.feed.post'
const SPACE_TYPE = 'com.example.bench.space'

export class NotApplicable extends Error {}

// ---------------------------------------------------------------------------------------------
// record keys: TIDs we generate ourselves, so scenarios know every rkey they wrote

const S32 = '234567abcdefghijklmnopqrstuvwxyz'
let lastMicros = 0
const clockId = BigInt(Math.floor(Math.random() * 1024))
export function tid() {
  let micros = Date.now() * 1000
  if (micros <= lastMicros) micros = lastMicros + 1
  lastMicros = micros
  let v = (BigInt(micros) << 10n) | clockId
  let s = ''
  for (let i = 0; i < 13; i++) {
    s = S32[Number(v & 31n)] + s
    v >>= 5n
  }
  return s
}

const post = (i) => ({ $type: POST, text: `bench post ${i}`, createdAt: new Date().toISOString() })

// ---------------------------------------------------------------------------------------------
// one server under test, with the accounts and seeded collections the scenarios share

const runTag = Date.now().toString(36).slice(-5) + randomBytes(2).toString('hex')

export class Target {
  constructor(server) {
    this.server = server
    this.label = server.label
    this.x = new Xrpc(server.url)
    this.accounts = []
    this.seeds = new Map()
    this.n = 0
  }

  async createAccount() {
    const handle = `b${runTag}${this.n++}.test`
    const out = await this.x.call('com.atproto.server.createAccount', {
      body: { handle, email: `${handle}@example.com`, password: PASSWORD },
    })
    const account = { did: out.did, handle, accessJwt: out.accessJwt, refreshJwt: out.refreshJwt }
    this.accounts.push(account)
    return account
  }

  async ensureAccounts(n) {
    while (this.accounts.length < n) await this.createAccount()
    return this.accounts.slice(0, n)
  }

  /** An account of its own holding `count` posts written by applyWrites (200 per call). */
  async seed(count) {
    if (this.seeds.has(count)) return this.seeds.get(count)
    const account = await this.createAccount()
    const rkeys = []
    for (let done = 0; done < count;) {
      const n = Math.min(200, count - done)
      const writes = []
      for (let i = 0; i < n; i++) {
        const rkey = tid()
        rkeys.push(rkey)
        writes.push({ $type: 'com.atproto.repo.applyWrites#create', collection: POST, rkey, value: post(done + i) })
      }
      await this.x.call('com.atproto.repo.applyWrites', {
        token: account.accessJwt,
        body: { repo: account.did, writes },
      })
      done += n
    }
    const seed = { account, rkeys }
    this.seeds.set(count, seed)
    return seed
  }

  /**
   * The space `account` governs for the space-write scenarios, created on first use (its own
   * permissioned repo in it is where those writes go). n/a on a server without Spaces.
   */
  async space(account) {
    if (account.space) return account.space
    const out = await naOnNotImplemented(() =>
      this.x.call('com.atproto.simplespace.createSpace', {
        token: account.accessJwt,
        body: {
          type: SPACE_TYPE,
          skey: 'bench',
          policy: { $type: 'com.atproto.simplespace.defs#memberListPolicy' },
          appAccess: { $type: 'com.atproto.simplespace.defs#open' },
        },
      }),
    )
    account.space = out.uri
    return account.space
  }

  async close() {
    await this.x.close()
  }
}

// ---------------------------------------------------------------------------------------------
// helpers

const isAuthFailure = (err) => err instanceof XrpcError && err.status === 401
const bumpBuffer = (buf, i) => buf.writeUInt32BE(i >>> 0, 0)

async function naOnNotImplemented(fn) {
  try {
    return await fn()
  } catch (err) {
    if (isNotImplemented(err)) throw new NotApplicable(err.message)
    throw err
  }
}

/** Profiles of size: full run and QUICK=1. */
export function profile(quick) {
  return quick
    ? { seconds: 3, accounts: 10, getRepos: 2, firehoseSeconds: 4, small: 2000, large: 10000 }
    : { seconds: 10, accounts: 30, getRepos: 5, firehoseSeconds: 10, small: 2000, large: 10000 }
}

// ---------------------------------------------------------------------------------------------
// the scenarios. setup() runs unmeasured; run() is measured (server CPU around it).

export const SCENARIOS = [
  {
    key: 'createAccount',
    name: 'createAccount (c=2)',
    metric: 'req/s',
    run: (t, p) => runLoad({ concurrency: 2, count: p.accounts, op: () => t.createAccount() }),
  },
  {
    key: 'createSession',
    name: 'createSession (c=4)',
    metric: 'req/s',
    setup: (t) => t.ensureAccounts(4),
    run: (t, p) =>
      runLoad({
        concurrency: 4,
        durationMs: p.seconds * 1000,
        op: (i) =>
          t.x.call('com.atproto.server.createSession', {
            body: { identifier: t.accounts[i % t.accounts.length].handle, password: PASSWORD },
          }),
      }),
  },
  {
    key: 'createSession.wrongPassword',
    name: 'createSession wrong password (c=4)',
    metric: 'req/s',
    setup: (t) => t.ensureAccounts(4),
    run: (t, p) =>
      runLoad({
        concurrency: 4,
        durationMs: p.seconds * 1000,
        isExpected: isAuthFailure,
        op: async (i) => {
          await t.x.call('com.atproto.server.createSession', {
            body: { identifier: t.accounts[i % t.accounts.length].handle, password: `wrong-${PASSWORD}` },
          })
          throw new Error('a wrong password was accepted')
        },
      }),
  },
  {
    key: 'createSession.unknownHandle',
    name: 'createSession unknown handle (c=4)',
    metric: 'req/s',
    run: (t, p) =>
      runLoad({
        concurrency: 4,
        durationMs: p.seconds * 1000,
        isExpected: isAuthFailure,
        op: async (i) => {
          await t.x.call('com.atproto.server.createSession', {
            body: { identifier: `nobody${runTag}${i}.test`, password: PASSWORD },
          })
          throw new Error('an unknown handle logged in')
        },
      }),
  },
  {
    key: 'getSession',
    name: 'getSession (c=16)',
    metric: 'req/s',
    setup: (t) => t.ensureAccounts(16),
    run: (t, p) =>
      runLoad({
        concurrency: 16,
        durationMs: p.seconds * 1000,
        op: (i, w) => t.x.call('com.atproto.server.getSession', { token: t.accounts[w % 16].accessJwt }),
      }),
  },
  {
    // what a browser sends before each cross-origin getSession (and most other calls): it must
    // cost no more than the call it precedes
    key: 'cors.preflight',
    name: 'CORS preflight of getSession (c=16)',
    metric: 'req/s',
    run: (t, p) =>
      runLoad({
        concurrency: 16,
        durationMs: p.seconds * 1000,
        op: () => t.x.preflight('com.atproto.server.getSession', { headers: 'authorization, dpop, atproto-accept-labelers' }),
      }),
  },
  {
    // OAuth: a DPoP-bound access token per worker, a fresh proof (ES256, new jti, ath) on every
    // call, so proof verification and the replay store are on the measured path
    key: 'getSession.dpop',
    name: 'getSession with DPoP (c=16)',
    metric: 'req/s',
    setup: async (t) => {
      const accounts = await t.ensureAccounts(16)
      const publicUrl = t.server.publicUrl ?? t.server.url
      const sessions = []
      try {
        for (const a of accounts) sessions.push(await oauthSession(t.server.url, publicUrl, { handle: a.handle, password: PASSWORD }))
      } catch (err) {
        if (err instanceof OAuthUnavailable) throw new NotApplicable(err.message)
        throw err
      }
      return sessions.map((s) => ({ ...s, ath: ath(s.accessToken), htu: `${s.publicUrl}/xrpc/com.atproto.server.getSession` }))
    },
    run: (t, p, sessions) =>
      runLoad({
        concurrency: 16,
        durationMs: p.seconds * 1000,
        op: (i, w) => {
          const s = sessions[w]
          return t.x.call('com.atproto.server.getSession', {
            headers: { authorization: `DPoP ${s.accessToken}`, dpop: s.key.proof('GET', s.htu, { ath: s.ath }) },
          })
        },
      }),
  },
  {
    key: 'refreshSession',
    name: 'refreshSession chain (c=4 chains)',
    metric: 'req/s',
    setup: async (t) => {
      const accounts = await t.ensureAccounts(4)
      const chains = []
      for (const a of accounts) {
        const s = await t.x.call('com.atproto.server.createSession', {
          body: { identifier: a.handle, password: PASSWORD },
        })
        chains.push({ handle: a.handle, refreshJwt: s.refreshJwt })
      }
      return chains
    },
    run: (t, p, chains) =>
      runLoad({
        concurrency: chains.length,
        durationMs: p.seconds * 1000,
        op: async (i, w) => {
          const out = await t.x.call('com.atproto.server.refreshSession', { token: chains[w].refreshJwt, post: true })
          chains[w].refreshJwt = out.refreshJwt
        },
      }),
  },
  createRecordScenario('createRecord.one', 'createRecord, one account (c=1)', 1),
  createRecordScenario('createRecord.eight', 'createRecord, 8 accounts (c=8)', 8),
  // the same posts into each account's own permissioned repo in a space it created: the LtHash,
  // the operation log and the write notification in place of the MST, the commit and the firehose
  createRecordScenario('createRecord.space.one', 'space createRecord, one account (c=1)', 1, { space: true }),
  createRecordScenario('createRecord.space.eight', 'space createRecord, 8 accounts (c=8)', 8, { space: true }),
  // the same writes by OAuth apps: DPoP on every call, then the permission check, with the wide
  // transitional grant and with the one granular permission a posting app asks for
  oauthCreateRecordScenario('createRecord.oauth.generic', 'createRecord, OAuth transition:generic (c=8)', 'atproto transition:generic'),
  oauthCreateRecordScenario(
    'createRecord.oauth.granular',
    'createRecord, OAuth repo:<post>?action=create (c=8)',
    `atproto repo:${POST}?action=create`,
  ),
  {
    key: 'applyWrites',
    name: 'applyWrites 200 creates (c=1)',
    metric: 'records/s',
    setup: async (t) => {
      const a = await t.createAccount()
      await naOnNotImplemented(() =>
        t.x.call('com.atproto.repo.applyWrites', {
          token: a.accessJwt,
          body: { repo: a.did, writes: [{ $type: 'com.atproto.repo.applyWrites#create', collection: POST, value: post(-1) }] },
        }),
      )
      return a
    },
    run: (t, p, a) =>
      runLoad({
        concurrency: 1,
        durationMs: p.seconds * 1000,
        op: async (i) => {
          const writes = []
          for (let k = 0; k < 200; k++) {
            writes.push({ $type: 'com.atproto.repo.applyWrites#create', collection: POST, rkey: tid(), value: post(i * 200 + k) })
          }
          await t.x.call('com.atproto.repo.applyWrites', { token: a.accessJwt, body: { repo: a.did, writes } })
          return 200
        },
      }),
    units: 'records',
  },
  {
    key: 'getRecord',
    name: 'getRecord (c=16)',
    metric: 'req/s',
    setup: (t, p) => naOnNotImplemented(() => t.seed(p.small)),
    run: (t, p, seed) =>
      runLoad({
        concurrency: 16,
        durationMs: p.seconds * 1000,
        op: (i) =>
          t.x.call('com.atproto.repo.getRecord', {
            params: { repo: seed.account.did, collection: POST, rkey: seed.rkeys[(i * 7919) % seed.rkeys.length] },
          }),
      }),
  },
  ...[
    ['small', '2,000'],
    ['large', '10,000'],
  ].map(([size, label]) => ({
    key: `listRecords.${size}`,
    name: `listRecords 100 of ${label} (c=16)`,
    metric: 'req/s',
    setup: async (t, p) => {
      const seed = await naOnNotImplemented(() => t.seed(p[size]))
      // each worker pages through the whole collection, starting at a different place
      const cursors = Array.from({ length: 16 }, (_, w) => (w === 0 ? undefined : seed.rkeys[Math.floor((w * seed.rkeys.length) / 16)]))
      return { seed, cursors }
    },
    run: (t, p, { seed, cursors }) =>
      runLoad({
        concurrency: 16,
        durationMs: p.seconds * 1000,
        op: async (i, w) => {
          const out = await t.x.call('com.atproto.repo.listRecords', {
            params: { repo: seed.account.did, collection: POST, limit: 100, cursor: cursors[w] },
          })
          if (!Array.isArray(out?.records)) throw new Error('listRecords answered without records')
          cursors[w] = out.cursor && out.records.length > 0 ? out.cursor : undefined
        },
      }),
  })),
  {
    key: 'getRepo',
    name: 'getRepo of 10,000 records (c=1)',
    metric: 'MB/s',
    setup: async (t, p) => {
      const seed = await naOnNotImplemented(() => t.seed(p.large))
      const { bytes } = await naOnNotImplemented(() =>
        t.x.call('com.atproto.sync.getRepo', { params: { did: seed.account.did }, raw: true }),
      )
      return { seed, carBytes: bytes }
    },
    run: (t, p, { seed }) =>
      runLoad({
        concurrency: 1,
        count: p.getRepos,
        op: async () => {
          const { bytes } = await t.x.call('com.atproto.sync.getRepo', { params: { did: seed.account.did }, raw: true })
          return bytes
        },
      }),
    units: 'bytes',
    extra: (s) => `CAR ${(s.carBytes / 1e6).toFixed(2)} MB`,
  },
  {
    // the 10,000-record repository's own CAR, imported back after all its records are deleted
    // (the same DID, so a server checking that the CAR is the account's own accepts it)
    key: 'importRepo',
    name: 'importRepo of the 10,000-record CAR (c=1)',
    metric: 'records/s',
    setup: async (t, p) => {
      const seed = await naOnNotImplemented(() => t.seed(p.large))
      const { account } = seed
      // probe first, so a server without importRepo keeps its records
      try {
        await t.x.call('com.atproto.repo.importRepo', {
          token: account.accessJwt,
          body: Buffer.alloc(0),
          encoding: 'application/vnd.ipld.car',
        })
      } catch (err) {
        if (isNotImplemented(err)) throw new NotApplicable(err.message)
      }
      seed.car ??= await t.x.call('com.atproto.sync.getRepo', { params: { did: account.did }, raw: 'buffer' })
      for (let i = 0; i < seed.rkeys.length; i += 200) {
        const writes = seed.rkeys
          .slice(i, i + 200)
          .map((rkey) => ({ $type: 'com.atproto.repo.applyWrites#delete', collection: POST, rkey }))
        await t.x.call('com.atproto.repo.applyWrites', { token: account.accessJwt, body: { repo: account.did, writes } })
      }
      return seed
    },
    run: (t, p, seed) =>
      runLoad({
        concurrency: 1,
        count: 1,
        op: async () => {
          await t.x.call('com.atproto.repo.importRepo', {
            token: seed.account.accessJwt,
            body: seed.car,
            encoding: 'application/vnd.ipld.car',
          })
          const back = await t.x.call('com.atproto.repo.getRecord', {
            params: { repo: seed.account.did, collection: POST, rkey: seed.rkeys[seed.rkeys.length - 1] },
          })
          if (!back?.value) throw new Error('an imported record is missing')
          return seed.rkeys.length
        },
      }),
    extra: (seed) => (seed.car ? `CAR ${(seed.car.length / 1e6).toFixed(2)} MB` : ''),
  },
  {
    key: 'uploadBlob',
    name: 'uploadBlob 1 MiB (c=4)',
    metric: 'MB/s',
    setup: async (t) => {
      const [a] = await t.ensureAccounts(1)
      const buffers = Array.from({ length: 4 }, () => randomBytes(1024 * 1024))
      await naOnNotImplemented(() => t.x.call('com.atproto.repo.uploadBlob', { token: a.accessJwt, body: buffers[0] }))
      return { a, buffers }
    },
    run: (t, p, { a, buffers }) =>
      runLoad({
        concurrency: 4,
        durationMs: p.seconds * 1000,
        op: async (i, w) => {
          bumpBuffer(buffers[w], i + 1) // a new blob every time
          await t.x.call('com.atproto.repo.uploadBlob', { token: a.accessJwt, body: buffers[w] })
          return buffers[w].length
        },
      }),
    units: 'bytes',
  },
  {
    key: 'firehose',
    name: 'firehose: 1 writer, 10 consumers',
    metric: 'events/s',
    setup: async (t) => {
      // a WebSocket that opens says the server has the firehose (a plain GET is no test: some
      // servers answer it 501 while serving the WebSocket)
      if (!(await websocketOpens(t))) {
        try {
          await t.x.call('com.atproto.sync.subscribeRepos')
        } catch (err) {
          if (isNotImplemented(err)) throw new NotApplicable(err.message)
        }
      }
      const writer = await t.createAccount()
      let mode = 'createRecord'
      try {
        await t.x.call('com.atproto.repo.createRecord', {
          token: writer.accessJwt,
          body: { repo: writer.did, collection: POST, record: post(-1) },
        })
      } catch (err) {
        if (!isNotImplemented(err)) throw err
        mode = 'createAccount' // until createRecord exists, accounts are the events
      }
      return { writer, mode }
    },
    run: (t, p, s) => runFirehose(t, p, s),
    extra: (s) => `writer: ${s.mode}`,
    // results are comparable between servers only with the same writer
    variant: (s) => s.mode,
  },
]

// ---------------------------------------------------------------------------------------------
// firehose: 10 live consumers; each write's event is matched by the record path (or the new
// account's DID) and its lag is the time from the write request to the consumer's receipt.

async function websocketOpens(t) {
  const { WebSocket } = await import('undici')
  const ws = new WebSocket(`${t.server.url.replace(/^http/, 'ws')}/xrpc/com.atproto.sync.subscribeRepos`)
  const opened = await new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), 5000)
    ws.onopen = () => (clearTimeout(timer), resolve(true))
    ws.onerror = () => (clearTimeout(timer), resolve(false))
  })
  ws.close()
  return opened
}

async function runFirehose(t, p, { writer, mode }) {
  const { decodeFirst } = await import('cborg')
  // CIDs (tag 42) are not needed here: keep them as bytes
  const tags = []
  tags[42] = (bytes) => bytes
  const decodeOptions = { tags, useMaps: false }
  const { WebSocket } = await import('undici')
  const wsUrl = `${t.server.url.replace(/^http/, 'ws')}/xrpc/com.atproto.sync.subscribeRepos`
  const sent = new Map() // key -> performance.now() of the write request
  const lags = []
  let delivered = 0
  let frames = 0
  let firstAt = Infinity
  let lastAt = 0
  const consumers = []
  for (let c = 0; c < 10; c++) {
    const ws = new WebSocket(wsUrl)
    ws.binaryType = 'arraybuffer'
    const seen = new Set()
    const consumer = { ws, seen, errors: 0 }
    ws.onmessage = (ev) => {
      const now = performance.now()
      frames++
      try {
        const bytes = new Uint8Array(ev.data)
        const [header, rest] = decodeFirst(bytes, decodeOptions)
        if (header.op !== 1) return
        const [body] = decodeFirst(rest, decodeOptions)
        let key
        if (mode === 'createRecord') {
          if (header.t !== '#commit' || body.repo !== writer.did) return
          key = body.ops?.[0]?.path
        } else {
          key = body.did
        }
        const at = sent.get(key)
        if (at === undefined || seen.has(key)) return
        seen.add(key)
        delivered++
        lags.push(now - at)
        if (now < firstAt) firstAt = now
        if (now > lastAt) lastAt = now
      } catch (err) {
        consumer.errors++
        if (process.env.BENCH_DEBUG && consumer.errors === 1) process.stderr.write(`firehose decode: ${err.stack}\n`)
      }
    }
    consumers.push(consumer)
  }
  await Promise.all(
    consumers.map(
      ({ ws }) =>
        new Promise((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error('firehose consumer did not connect within 10 s')), 10_000)
          ws.onopen = () => {
            clearTimeout(timer)
            resolve()
          }
          ws.onerror = (e) => {
            clearTimeout(timer)
            reject(new Error(`firehose consumer: ${e.message ?? 'connection error'}`))
          }
        }),
    ),
  )
  const start = performance.now()
  const load = await runLoad({
    concurrency: 1,
    durationMs: p.firehoseSeconds * 1000,
    op: async (i) => {
      if (mode === 'createRecord') {
        const rkey = tid()
        sent.set(`${POST}/${rkey}`, performance.now())
        await t.x.call('com.atproto.repo.createRecord', {
          token: writer.accessJwt,
          body: { repo: writer.did, collection: POST, rkey, record: post(i) },
        })
      } else {
        const t0 = performance.now()
        const a = await t.createAccount()
        sent.set(a.did, t0) // the account events carry the DID only once it is known
      }
    },
  })
  // let the consumers drain (bounded)
  const expected = load.ops * consumers.length
  const drainUntil = performance.now() + 10_000
  while (delivered < expected && performance.now() < drainUntil) await new Promise((r) => setTimeout(r, 50))
  for (const { ws } of consumers) ws.close()
  const consumerErrors = consumers.reduce((n, c) => n + c.errors, 0)
  lags.sort((a, b) => a - b)
  const span = Math.max(lastAt, start + load.elapsedMs) - start
  return {
    ...load,
    latencies: lags,
    units: delivered,
    elapsedMs: load.elapsedMs,
    unitSeconds: span / 1000,
    errors: load.errors + consumerErrors + Math.max(0, expected - delivered),
    note: `${delivered}/${expected} events delivered, ${frames} frames; lag = write request to receipt`,
  }
}

// ---------------------------------------------------------------------------------------------
// one measured scenario on one target

export async function runScenario(t, s, p) {
  const base = { key: s.key, scenario: s.name, server: t.label, metric: s.metric }
  let state
  try {
    state = await s.setup?.(t, p)
  } catch (err) {
    if (err instanceof NotApplicable) return { ...base, status: 'n/a', note: err.message }
    return { ...base, status: 'failed', note: `setup: ${err.message}` }
  }
  const pid = t.server.pid
  const cpu0 = cpuMs(pid)
  const main0 = cpuMs(pid, { mainThread: true })
  // the load client shares the machine with the server: what it used, and how busy all cores were
  const client0 = process.cpuUsage()
  const machine0 = machineCpu()
  let r
  try {
    r = await s.run(t, p, state)
  } catch (err) {
    if (err instanceof NotApplicable || isNotImplemented(err)) return { ...base, status: 'n/a', note: err.message }
    return { ...base, status: 'failed', note: err.message }
  }
  const cpu = cpuMs(pid) - cpu0
  const main = cpuMs(pid, { mainThread: true }) - main0
  const client = process.cpuUsage(client0)
  const machine1 = machineCpu()
  const mem = memory(pid)
  const seconds = r.elapsedMs / 1000
  // a scenario whose every call answered 501 is n/a, not a failure
  const samples = Object.keys(r.errorSamples)
  if (r.ops === 0 && samples.length > 0 && samples.every((m) => /^501 /.test(m))) {
    return { ...base, status: 'n/a', note: samples[0] }
  }
  // for the firehose, ops are writes and the latencies are per delivery (lag)
  const opCount = r.ops
  const unitSeconds = r.unitSeconds ?? seconds
  const metricValue = s.metric === 'req/s' ? r.ops / seconds : s.metric === 'MB/s' ? r.units / 1e6 / unitSeconds : r.units / unitSeconds
  return {
    ...base,
    status: r.errors > 0 && r.ops === 0 ? 'failed' : 'ok',
    ops: opCount,
    errors: r.errors,
    errorSamples: r.errorSamples,
    seconds,
    reqPerS: opCount / seconds,
    value: metricValue,
    p50: percentile(r.latencies, 50),
    p99: percentile(r.latencies, 99),
    cpuMs: cpu,
    cpuMsPerOp: opCount > 0 ? cpu / opCount : NaN,
    mainThreadBusy: main / Math.max(1, r.elapsedMs),
    clientCpuMsPerOp: opCount > 0 ? (client.user + client.system) / 1000 / opCount : NaN,
    machineBusy: (machine1.busy - machine0.busy) / Math.max(1, machine1.total - machine0.total),
    rssMiB: mem.rssMiB,
    note: [r.note, s.extra?.(state ?? {})].filter(Boolean).join('; ') || undefined,
    variant: s.variant?.(state ?? {}),
  }
}

/**
 * createRecord with one writer per account, `accounts` of them at once; with `space`,
 * com.atproto.space.createRecord of the same record, each account into its own repo in a space
 * it created
 */
function createRecordScenario(key, name, accounts, { space = false } = {}) {
  const write = (t, a, i) =>
    space
      ? t.x.call('com.atproto.space.createRecord', {
          token: a.accessJwt,
          body: { space: a.space, repo: a.did, collection: POST, record: post(i) },
        })
      : t.x.call('com.atproto.repo.createRecord', { token: a.accessJwt, body: { repo: a.did, collection: POST, record: post(i) } })
  return {
    key,
    name,
    metric: 'req/s',
    setup: async (t) => {
      const list = await t.ensureAccounts(accounts)
      if (space) for (const a of list) await t.space(a)
      // the repo exists before the measure
      await naOnNotImplemented(() => write(t, list[0], -1))
      return list
    },
    run: (t, p, list) =>
      runLoad({
        concurrency: accounts,
        durationMs: p.seconds * 1000,
        op: (i, w) => write(t, list[w], i),
      }),
  }
}

function oauthCreateRecordScenario(key, name, scope) {
  const accounts = 8
  return {
    key,
    name,
    metric: 'req/s',
    setup: async (t) => {
      const list = await t.ensureAccounts(accounts)
      const publicUrl = t.server.publicUrl ?? t.server.url
      const sessions = []
      try {
        for (const a of list)
          sessions.push({ ...(await oauthSession(t.server.url, publicUrl, { handle: a.handle, password: PASSWORD }, scope)), did: a.did })
      } catch (err) {
        if (err instanceof OAuthUnavailable) throw new NotApplicable(err.message)
        throw err
      }
      return sessions.map((s) => ({ ...s, ath: ath(s.accessToken), htu: `${s.publicUrl}/xrpc/com.atproto.repo.createRecord` }))
    },
    run: (t, p, sessions) =>
      runLoad({
        concurrency: accounts,
        durationMs: p.seconds * 1000,
        op: (i, w) => {
          const s = sessions[w]
          return t.x.call('com.atproto.repo.createRecord', {
            headers: { authorization: `DPoP ${s.accessToken}`, dpop: s.key.proof('POST', s.htu, { ath: s.ath }) },
            body: { repo: s.did, collection: POST, record: post(i) },
          })
        },
      }),
  }
}
