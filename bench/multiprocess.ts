// Scaling from one server process to two on one PostgreSQL (and Redis): spawns N `node dist/bin.js`
// on a fresh schema, creates 8 accounts, then measures for a few seconds each
//   - createRecord, 16 clients spread over the 8 accounts and over the processes (round-robin)
//   - getSession, 16 clients
//   - firehose delivery: a consumer on the LAST process, sequential writes through the FIRST;
//     lag = consumer receipt time minus the writer's acknowledgement time
// Usage (after `make build`):
//   PDS_BENCH_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test [PDS_BENCH_REDIS_URL=redis://127.0.0.1:6379] \
//     node bench/multiprocess.ts [--procs 1|2] [--seconds 5]
// Prints one JSON line per measurement.
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { decodeAll } from '@atproto/lex-cbor'
import pg from 'pg'
import WebSocket from 'ws'

const args = process.argv.slice(2)
const opt = (name: string, dflt: number) => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 ? Number(args[i + 1]) : dflt
}
const PROCS = opt('procs', 2)
const SECONDS = opt('seconds', 5)
const CLIENTS = 16
const pgUrl = process.env.PDS_BENCH_POSTGRES_URL
const redisUrl = process.env.PDS_BENCH_REDIS_URL
if (!pgUrl) {
  process.stderr.write('PDS_BENCH_POSTGRES_URL is required\n')
  process.exit(1)
}
const BIN = new URL('../dist/bin.js', import.meta.url).pathname

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
    s.once('error', reject)
  })
}

async function waitHealthy(url: string) {
  for (let i = 0; i < 400; i++) {
    try {
      if ((await fetch(`${url}/xrpc/_health`)).ok) return
    } catch {}
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`${url} not healthy within 20 s`)
}

async function call(url: string, nsid: string, opts: { body?: unknown; token?: string } = {}) {
  const headers: Record<string, string> = {}
  if (opts.token) headers.authorization = `Bearer ${opts.token}`
  if (opts.body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(`${url}/xrpc/${nsid}`, {
    method: opts.body !== undefined ? 'POST' : 'GET',
    headers,
    body: opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
  })
  const json = (await res.json().catch(() => undefined)) as any
  return { status: res.status, json }
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0

async function load(name: string, urls: string[], op: (url: string, client: number, i: number) => Promise<boolean>) {
  const lat: number[] = []
  let errors = 0
  const end = Date.now() + SECONDS * 1000
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, c) => {
      for (let i = 0; Date.now() < end; i++) {
        const t = performance.now()
        const ok = await op(urls[(c + i) % urls.length], c, i)
        lat.push(performance.now() - t)
        if (!ok) errors++
      }
    }),
  )
  lat.sort((a, b) => a - b)
  console.log(
    JSON.stringify({
      procs: PROCS,
      measure: name,
      ops_per_s: Math.round(lat.length / SECONDS),
      p50_ms: +pct(lat, 50).toFixed(1),
      p99_ms: +pct(lat, 99).toFixed(1),
      errors,
    }),
  )
}

const schema = `bench_${randomBytes(4).toString('hex')}`
const dir = mkdtempSync(join(tmpdir(), 'pds-bench-mp-'))
const children: ChildProcess[] = []
try {
  const ports = await Promise.all(Array.from({ length: PROCS }, () => freePort()))
  const urls = ports.map((p) => `http://127.0.0.1:${p}`)
  for (const port of ports) {
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      PDS_PORT: String(port),
      PDS_BIND: '127.0.0.1',
      PDS_HOSTNAME: 'localhost',
      PDS_PUBLIC_URL: `http://localhost:${ports[0]}`,
      PDS_DATA_DIRECTORY: dir,
      PDS_DB_POSTGRES_URL: pgUrl,
      PDS_DB_POSTGRES_SCHEMA: schema,
      PDS_JWT_SECRET: 'bench-jwt-secret-0123456789abcdef',
      PDS_OAUTH_SIGNING_KEY: '1'.repeat(64),
      PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX: '2'.repeat(64),
      PDS_LOG_LEVEL: 'silent',
      PDS_RATE_LIMITS_ENABLED: 'false',
      PDS_SERVICE_HANDLE_DOMAINS: '.test',
      ...(redisUrl ? { PDS_REDIS_URL: redisUrl, PDS_DPOP_REPLAY_STORE: 'redis' } : {}),
    }
    const child = spawn(process.execPath, [BIN], { env, stdio: 'ignore' })
    children.push(child)
    // one after the other: the first runs the migrations
    await waitHealthy(`http://127.0.0.1:${port}`)
  }

  const accounts: any[] = []
  for (let i = 0; i < 8; i++) {
    const handle = `bench${i}-${randomBytes(3).toString('hex')}.test`
    const r = await call(urls[i % urls.length], 'com.atproto.server.createAccount', {
      body: { handle, email: `${handle}@example.com`, password: 'bench password' },
    })
    if (r.status !== 200) throw new Error(`createAccount: ${r.status} ${JSON.stringify(r.json)}`)
    accounts.push({ did: r.json.did as string, token: r.json.accessJwt as string })
  }

  await load('createRecord (8 accounts)', urls, async (url, c, i) => {
    const a = accounts[(c + i) % accounts.length]
    const r = await call(url, 'com.atproto.repo.createRecord', {
      token: a.token,
      body: { repo: a.did, collection: 'com.example.bench', record: { $type: 'com.example.bench', c, i } },
    })
    return r.status === 200
  })
  await load(
    'getSession',
    urls,
    async (url, c) => (await call(url, 'com.atproto.server.getSession', { token: accounts[c % 8].token })).status === 200,
  )

  // firehose delivery: consumer on the last process, writes through the first
  const ws = new WebSocket(`${urls[urls.length - 1].replace('http', 'ws')}/xrpc/com.atproto.sync.subscribeRepos`)
  const seen = new Map<string, number>()
  ws.on('message', (data: Buffer) => {
    const [, body] = [...decodeAll(new Uint8Array(data))] as [any, any]
    if (body?.rev) seen.set(body.rev, performance.now())
  })
  await new Promise((r, j) => (ws.once('open', r), ws.once('error', j)))
  const lags: number[] = []
  const end = Date.now() + SECONDS * 1000
  for (let i = 0; Date.now() < end; i++) {
    const a = accounts[i % 8]
    const r = await call(urls[0], 'com.atproto.repo.createRecord', {
      token: a.token,
      body: { repo: a.did, collection: 'com.example.bench', record: { $type: 'com.example.bench', i } },
    })
    const acked = performance.now()
    const rev = r.json?.commit?.rev as string
    for (let k = 0; k < 500 && !seen.has(rev); k++) await new Promise((res) => setTimeout(res, 1))
    if (seen.has(rev)) lags.push(Math.max(0, seen.get(rev)! - acked))
  }
  ws.close()
  lags.sort((a, b) => a - b)
  console.log(
    JSON.stringify({
      procs: PROCS,
      measure: 'firehose delivery lag (write on first, consume on last)',
      events: lags.length,
      p50_ms: +pct(lags, 50).toFixed(1),
      p99_ms: +pct(lags, 99).toFixed(1),
    }),
  )
} finally {
  for (const c of children) c.kill('SIGTERM')
  await Promise.all(children.map((c) => (c.exitCode === null ? new Promise((r) => c.on('exit', r)) : Promise.resolve())))
  const client = new pg.Client({ connectionString: pgUrl })
  await client.connect()
  await client.query(`drop schema if exists "${schema}" cascade`)
  await client.end()
  rmSync(dir, { recursive: true, force: true })
}
