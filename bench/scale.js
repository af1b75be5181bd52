#!/usr/bin/env node
// `make bench-scale`: how each cost grows with the size of the state. One JSON line per point on
// stdout (and in bench/results/scale-<time>.jsonl), then bench/results/scale.svg and
// bench/SCALE.md. Server CPU per op from /proc/<pid>/stat of the server process (bench/lib/proc.js).
//
//   node bench/scale.js [--quick] [--db sqlite|postgres] [--only repo,accounts,firehose,backfill] [--profile]
//     [--records 1000,20000] [--accounts ...] [--subscribers ...] [--events ...]
//
// --profile: each server runs with --cpu-prof (bench/results/profiles/, one per server process;
// summarize with bench/profile-summary.js)
//
// Curves: repository size (records in one repository, grown by applyWrites of 200), accounts
// (seeded offline by bench/lib/seed.js: the project's own store code, one precomputed password
// hash), firehose subscribers while writers commit 200 times a second. Loopback only; every
// measure runs for a fixed time or count, and the whole run stops by itself.
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, createWriteStream } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { request } from 'undici'
import WebSocket from 'ws'
import { runLoad, percentile } from './lib/load.js'
import { cpuMs, memory } from './lib/proc.js'
import { Xrpc } from './lib/xrpc.js'
import { freePort } from './lib/servers.js'
import { openSubscribers } from './lib/subscribers.js'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const RESULTS = path.join(ROOT, 'bench', 'results')
const argv = process.argv.slice(2)
const opt = (name, dflt) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : dflt)
const quick = argv.includes('--quick') || process.env.QUICK === '1'
const cpuProf = argv.includes('--profile')
const dbKind = opt('--db', 'sqlite')
const only = opt('--only', 'repo,accounts,firehose,backfill').split(',')
const SIZES = {
  records: quick ? [1_000, 10_000, 100_000] : [1_000, 10_000, 100_000, 1_000_000],
  accounts: quick ? [100, 10_000] : [100, 10_000, 100_000],
  subscribers: quick ? [10, 100, 1_000] : [10, 100, 1_000],
  events: quick ? [1_000_000] : [1_000_000],
}
// --records 1000,20000 (and --accounts, --subscribers): other sizes for a curve
for (const k of Object.keys(SIZES)) if (opt(`--${k}`)) SIZES[k] = opt(`--${k}`).split(',').map(Number)
const SECONDS = quick ? 2 : 4
const SEED_PASSWORD = 'bench-scale-password'
const log = (m) => process.stderr.write(`${m}\n`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const HARD_LIMIT_MIN = quick ? 15 : 120
setTimeout(() => {
  log(`bench-scale: hard limit of ${HARD_LIMIT_MIN} min reached`)
  process.exit(3)
}, HARD_LIMIT_MIN * 60_000).unref()

mkdirSync(RESULTS, { recursive: true })
const stamp = new Date().toISOString().replace(/[:.]/g, '-')
const jsonl = path.join(RESULTS, `scale-${dbKind}-${stamp}.jsonl`)
const points = []
function emit(p) {
  const line = { curve: p.curve, db: dbKind, ...p, load1: +os.loadavg()[0].toFixed(2) }
  points.push(line)
  process.stdout.write(JSON.stringify(line) + '\n')
  writeFileSync(jsonl, JSON.stringify(line) + '\n', { flag: 'a' })
}

// ---- the server: our dist/bin.js as a child process on a data directory kept across restarts
const servers = new Set()
process.on('exit', () => servers.forEach((c) => c.kill('SIGKILL')))
async function newState() {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'pds-scale-'))
  const port = await freePort()
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    PDS_PORT: String(port),
    PDS_BIND: '127.0.0.1',
    PDS_HOSTNAME: 'localhost',
    PDS_DATA_DIRECTORY: dataDir,
    PDS_RATE_LIMITS_ENABLED: 'false',
    PDS_LOG_LEVEL: 'warn',
    PDS_SERVICE_HANDLE_DOMAINS: '.test',
    PDS_FIREHOSE_CONNECTIONS_PER_ADDRESS: '5000',
    // importRepo takes a CAR up to this size: a million records make ~200 MB
    PDS_BLOB_UPLOAD_LIMIT: String(2 ** 30),
  }
  let cleanup = async () => {}
  if (dbKind === 'postgres') {
    const url = process.env.PDS_TEST_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/test'
    const schema = `scale_${process.pid}_${Date.now().toString(36)}`
    Object.assign(env, {
      PDS_DB_POSTGRES_URL: url,
      PDS_DB_POSTGRES_SCHEMA: schema,
      PDS_JWT_SECRET: randomBytes(32).toString('hex'),
      PDS_OAUTH_SIGNING_KEY: randomBytes(32).toString('hex'),
      PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX: randomBytes(32).toString('hex'),
    })
    cleanup = async () => {
      const { default: pg } = await import('pg')
      const c = new pg.Client({ connectionString: url })
      await c.connect()
      await c.query(`drop schema if exists "${schema}" cascade`)
      await c.end()
    }
  }
  const url = `http://127.0.0.1:${port}`
  let child
  const state = {
    url,
    env,
    startCpuMs: 0,
    get pid() {
      return child.pid
    },
    /**
     * starts the server; ms from spawn to the first answered request (`startCpuMs`: the server's
     * CPU time by then, which a busy machine does not inflate the way it does the wall time)
     */
    async start() {
      const t0 = performance.now()
      const flags = cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${path.join(RESULTS, 'profiles')}`] : []
      child = spawn(process.execPath, [...flags, path.join(ROOT, 'dist', 'bin.js')], { env, stdio: ['ignore', 'pipe', 'pipe'] })
      servers.add(child)
      const out = createWriteStream(path.join(RESULTS, 'scale.server.log'), { flags: 'a' })
      child.stdout.pipe(out)
      child.stderr.pipe(out)
      for (let i = 0; ; i++) {
        if (child.exitCode !== null) throw new Error('server exited; see bench/results/scale.server.log')
        try {
          const res = await request(`${url}/xrpc/_health`)
          await res.body.text()
          if (res.statusCode === 200) {
            state.startCpuMs = cpuMs(child.pid)
            return performance.now() - t0
          }
        } catch {}
        if (i > 3000) throw new Error('server not healthy within 60 s')
        await sleep(20)
      }
    },
    async stop() {
      if (child && child.exitCode === null) {
        const gone = new Promise((r) => child.once('exit', r))
        child.kill('SIGTERM')
        await gone
      }
      servers.delete(child)
    },
    async dispose() {
      await state.stop()
      await cleanup()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
  return state
}

/** accounts straight into the store (bench/lib/seed.js), with the server stopped */
function seed(state, from, count) {
  return run(state, path.join(ROOT, 'bench', 'lib', 'seed.js'), [String(from), String(count)])
}

/** a seeding script on the server's store, with the server stopped */
function run(state, script, args) {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, [script, ...args], { env: state.env, stdio: 'inherit' })
    c.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${path.basename(script)} exited ${code}`))))
  })
}

/** a runLoad with the server's CPU ms per op around it */
async function measured(state, load) {
  const c0 = cpuMs(state.pid)
  const r = await runLoad(load)
  const cpu = cpuMs(state.pid) - c0
  return {
    ops: r.ops,
    errors: r.errors,
    perSec: +(r.units / (r.elapsedMs / 1000)).toFixed(1),
    p50: +percentile(r.latencies, 50).toFixed(2),
    p99: +percentile(r.latencies, 99).toFixed(2),
    cpuMsPerOp: +(cpu / Math.max(1, r.ops)).toFixed(3),
    cpuMsPerUnit: +(cpu / Math.max(1, r.units)).toFixed(4),
  }
}

/** three measures of `load` taken one after another; the one with the median CPU per op */
async function medianOf3(state, load) {
  const runs = []
  for (let i = 0; i < 3; i++) runs.push(await measured(state, load))
  runs.sort((a, b) => a.cpuMsPerOp - b.cpuMsPerOp)
  return runs[1]
}

/**
 * the op run unmeasured for a second first: a server just started compiles its hot paths during
 * the first measure otherwise, which made the smallest size look dearer than the largest
 */
async function warm(load) {
  const r = await runLoad({ ...load, durationMs: 1000, count: undefined })
  return r.ops
}

/** RSS sampled every 10 ms while `fn` runs: growth over the level before */
async function rssDuring(pid, fn) {
  const before = memory(pid).rssMiB
  let max = before
  const t = setInterval(() => (max = Math.max(max, memory(pid).rssMiB)), 10)
  try {
    const out = await fn()
    return { out, rssBeforeMiB: +before.toFixed(1), rssGrowthMiB: +(max - before).toFixed(1), peakMiB: +memory(pid).peakMiB.toFixed(1) }
  } finally {
    clearInterval(t)
  }
}

async function login(x, handle) {
  return x.call('com.atproto.server.createSession', { body: { identifier: handle, password: SEED_PASSWORD } })
}

// ---- repository size
async function repoCurve() {
  const state = await newState()
  await seed(state, 0, 1)
  await state.start()
  const x = new Xrpc(state.url, 32)
  const acct = await login(x, 's0x.test')
  const token = acct.accessJwt
  let have = 0
  // the records named s<n>, which getRecord and listRecords pick from
  let seeded = 0
  const grow = async (to) => {
    // the state itself, through the server's own applyWrites
    while (have < to) {
      const n = Math.min(200, to - have)
      const writes = Array.from({ length: n }, (_, i) => ({
        $type: 'com.atproto.repo.applyWrites#create',
        collection: 'app.bsky.feed.post',
        rkey: `s${String(seeded + i).padStart(8, '0')}`,
        value: { $type: 'app.bsky.feed.post', text: `post ${seeded + i}`, createdAt: new Date().toISOString() },
      }))
      await x.call('com.atproto.repo.applyWrites', { token, body: { repo: acct.did, writes } })
      have += n
      seeded += n
    }
  }
  for (const size of SIZES.records) {
    const t0 = performance.now()
    await grow(size)
    log(`repo: ${size} records (grown in ${((performance.now() - t0) / 1000).toFixed(1)} s)`)
    const post = () => ({ $type: 'app.bsky.feed.post', text: 'x', createdAt: new Date().toISOString() })
    const createLoad = {
      concurrency: 1,
      durationMs: SECONDS * 1000,
      op: () =>
        x.call('com.atproto.repo.createRecord', { token, body: { repo: acct.did, collection: 'app.bsky.feed.post', record: post() } }),
    }
    const rkey = (i) => `s${String(i).padStart(8, '0')}`
    const getLoad = {
      concurrency: 16,
      durationMs: SECONDS * 1000,
      op: (i) =>
        x.call('com.atproto.repo.getRecord', {
          params: { repo: acct.did, collection: 'app.bsky.feed.post', rkey: rkey((i * 7919) % seeded) },
        }),
    }
    const listLoad = {
      concurrency: 16,
      durationMs: SECONDS * 1000,
      op: (i) =>
        x.call('com.atproto.repo.listRecords', {
          params: { repo: acct.did, collection: 'app.bsky.feed.post', limit: 100, cursor: rkey((i * 7919) % seeded) },
        }),
    }
    if (size === SIZES.records[0]) {
      have += await warm(createLoad)
      await warm(getLoad)
      await warm(listLoad)
    }
    const createRecord = await measured(state, createLoad)
    const applyWrites = await measured(state, {
      concurrency: 1,
      // a count, not a time: each call adds 200 records, and the point is about one size; 25
      // calls, so the one that meets a checkpoint or a collection weighs what it does in use
      count: 25,
      op: async () => {
        const writes = Array.from({ length: 200 }, () => ({
          $type: 'com.atproto.repo.applyWrites#create',
          collection: 'app.bsky.feed.post',
          value: post(),
        }))
        await x.call('com.atproto.repo.applyWrites', { token, body: { repo: acct.did, writes } })
        return 200
      },
    })
    // the measures wrote records too: the repository is that much larger from here on
    have += createRecord.ops + applyWrites.ops * 200
    // reads are compared across sizes within 1.2x: each is the median of three measures, which
    // a neighbour's burst on this shared machine moves far less than one
    const getRecord = await medianOf3(state, getLoad)
    const listRecords = await medianOf3(state, listLoad)
    // getRepo: first byte, throughput, RSS growth while it streams
    const c0 = cpuMs(state.pid)
    const exp = await rssDuring(state.pid, async () => {
      const t = performance.now()
      const res = await request(`${state.url}/xrpc/com.atproto.sync.getRepo?did=${acct.did}`)
      const chunks = []
      let first
      for await (const chunk of res.body) {
        first ??= performance.now() - t
        chunks.push(chunk)
      }
      return { first, ms: performance.now() - t, car: Buffer.concat(chunks) }
    })
    const exportCpu = cpuMs(state.pid) - c0
    const car = exp.out.car
    // importRepo of that CAR back into the same account, emptied first (import takes only an
    // empty repository), at the largest size only: emptied in the store with the server stopped
    // (seed.js empty), and the restart makes the peak RSS (VmHWM) the import's own
    let imp
    if (size === SIZES.records.at(-1)) {
      await state.stop()
      await seed(state, 'empty', acct.did)
      await state.start()
      imp = await rssDuring(state.pid, async () => {
        const t = performance.now()
        await x.call('com.atproto.repo.importRepo', { token, body: car, encoding: 'application/vnd.ipld.car' })
        return performance.now() - t
      })
    }
    emit({
      curve: 'repo',
      records: size,
      recordsAfter: have,
      createRecord,
      applyWrites,
      getRecord,
      listRecords,
      getRepo: {
        bytes: car.length,
        firstByteMs: +exp.out.first.toFixed(1),
        ms: +exp.out.ms.toFixed(1),
        MBps: +(car.length / 1e6 / (exp.out.ms / 1000)).toFixed(1),
        cpuMs: +exportCpu.toFixed(0),
        rssGrowthMiB: exp.rssGrowthMiB,
      },
      importRepo: imp && {
        ms: +imp.out.toFixed(0),
        recordsPerSec: +(have / (imp.out / 1000)).toFixed(0),
        rssGrowthMiB: imp.rssGrowthMiB,
        peakMiB: imp.peakMiB,
      },
    })
  }
  await x.close()
  await state.dispose()
}

// ---- accounts
async function accountsCurve() {
  for (const n of SIZES.accounts) {
    const state = await newState()
    const t0 = performance.now()
    await seed(state, 0, n)
    const seedS = (performance.now() - t0) / 1000
    log(`accounts: ${n} seeded in ${seedS.toFixed(1)} s`)
    const startMs = await state.start()
    await sleep(2000)
    const idleRssMiB = +memory(state.pid).rssMiB.toFixed(1)
    const x = new Xrpc(state.url, 32)
    const pick = (i) => `s${(i * 7919) % n}x.test`
    const sessions = []
    for (let i = 0; i < 16; i++) sessions.push(await login(x, pick(i)))
    const getSessionLoad = {
      concurrency: 16,
      durationMs: SECONDS * 1000,
      op: (i, w) => x.call('com.atproto.server.getSession', { token: sessions[w].accessJwt }),
    }
    const createSessionLoad = { concurrency: 4, durationMs: SECONDS * 1000, op: (i) => login(x, pick(i + 100)) }
    const createRecordLoad = {
      concurrency: 8,
      durationMs: SECONDS * 1000,
      op: (i, w) =>
        x.call('com.atproto.repo.createRecord', {
          token: sessions[w].accessJwt,
          body: {
            repo: sessions[w].did,
            collection: 'app.bsky.feed.like',
            record: {
              $type: 'app.bsky.feed.like',
              subject: {
                uri: `at://${sessions[w].did}/app.bsky.feed.post/x`,
                cid: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm',
              },
              createdAt: new Date().toISOString(),
            },
          },
        }),
    }
    // each size is a fresh server: every op warmed before any is measured
    for (const load of [getSessionLoad, createSessionLoad, createRecordLoad]) await warm(load)
    const getSession = await measured(state, getSessionLoad)
    const createSession = await measured(state, createSessionLoad)
    const createRecord = await measured(state, createRecordLoad)
    // backfill: one consumer from cursor 0 over the whole log (two events per account and more)
    const backfill = await replay(state.url)
    emit({
      curve: 'accounts',
      accounts: n,
      startMs: +startMs.toFixed(0),
      startCpuMs: state.startCpuMs,
      seedS: +seedS.toFixed(1),
      idleRssMiB,
      getSession,
      createSession,
      createRecord,
      backfill,
    })
    await x.close()
    await state.dispose()
  }
}

/** one consumer from cursor 0 over the whole log: events per second from its first frame to its last */
function replay(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${url.replace('http', 'ws')}/xrpc/com.atproto.sync.subscribeRepos?cursor=0`)
    let events = 0
    let bytes = 0
    let first = 0
    let last = 0
    let quiet
    const done = () => {
      ws.terminate()
      const s = Math.max(0.001, (last - first) / 1000)
      resolve({ events, perSec: +(events / s).toFixed(0), MBps: +(bytes / 1e6 / s).toFixed(1) })
    }
    ws.on('message', (buf) => {
      bytes += buf.length
      last = performance.now()
      if (!events++) first = last
      clearTimeout(quiet)
      // the log is done when nothing comes for a second (nothing writes meanwhile)
      quiet = setTimeout(done, 1000)
    })
    ws.on('error', reject)
  })
}

// ---- backfill: one consumer from cursor 0 over a log of real #commit frames
async function backfillCurve() {
  for (const events of SIZES.events) {
    const state = await newState()
    await seed(state, 0, 8)
    await state.start()
    const x = new Xrpc(state.url, 32)
    const sessions = []
    for (let i = 0; i < 8; i++) sessions.push(await login(x, `s${i}x.test`))
    await Promise.all(
      sessions.map(async (s) => {
        for (let i = 0; i < 32; i++) await x.call('com.atproto.repo.createRecord', { token: s.accessJwt, body: like(s.did) })
      }),
    )
    await x.close()
    await state.stop()
    const t0 = performance.now()
    await run(state, path.join(ROOT, 'bench', 'lib', 'seed-events.js'), [String(events)])
    log(`backfill: ${events} events seeded in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
    await state.start()
    const c0 = cpuMs(state.pid)
    const r = await rssDuring(state.pid, () => replay(state.url))
    const cpu = cpuMs(state.pid) - c0
    emit({
      curve: 'backfill',
      events: r.out.events,
      perSec: r.out.perSec,
      MBps: r.out.MBps,
      cpuUsPerEvent: +((cpu * 1000) / Math.max(1, r.out.events)).toFixed(2),
      rssGrowthMiB: r.rssGrowthMiB,
    })
    await state.dispose()
  }
}

const like = (did) => ({
  repo: did,
  collection: 'app.bsky.feed.like',
  record: {
    $type: 'app.bsky.feed.like',
    subject: { uri: `at://${did}/app.bsky.feed.post/x`, cid: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm' },
    createdAt: new Date().toISOString(),
  },
})

// ---- firehose
async function firehoseCurve() {
  for (const subs of SIZES.subscribers) {
    const state = await newState()
    await seed(state, 0, 8)
    await state.start()
    const x = new Xrpc(state.url, 32)
    const sessions = []
    for (let i = 0; i < 8; i++) sessions.push(await login(x, `s${i}x.test`))
    const answered = new Map()
    const wsUrl = `${state.url.replace('http', 'ws')}/xrpc/com.atproto.sync.subscribeRepos`
    // up to 10 subscribers read in this process, as a client next to its own writes sees them;
    // more read in processes of their own (bench/lib/subscribers.js), up to 500 each
    const hosts = []
    if (subs <= 10) {
      const local = await openSubscribers(wsUrl, subs)
      hosts.push({
        count: async () => local.frames(),
        finish: async (answered) => ({ frames: local.frames(), lags: local.lags(answered) }),
      })
    }
    for (let p = 0, procs = subs <= 10 ? 0 : Math.ceil(subs / 500); p < procs; p++) {
      const n = Math.floor(subs / procs) + (p < subs % procs ? 1 : 0)
      const child = spawn(process.execPath, [path.join(ROOT, 'bench', 'lib', 'subscribers.js'), wsUrl, String(n)], {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        serialization: 'advanced',
      })
      await new Promise((resolve, reject) => (child.once('message', resolve), child.once('exit', reject)))
      const ask = (msg) => new Promise((resolve) => (child.once('message', resolve), child.send(msg)))
      hosts.push({ pid: child.pid, count: async () => (await ask('count')).frames, finish: (answered) => ask({ answered }) })
    }
    const delivered = async () => (await Promise.all(hosts.map((h) => h.count()))).reduce((a, b) => a + b, 0)
    // one more that reads nothing: the others must not wait for it
    const slow = new WebSocket(wsUrl)
    await new Promise((r) => slow.once('open', r))
    slow._socket.pause()
    const rss0 = memory(state.pid).rssMiB
    let maxRss = rss0
    const rssTimer = setInterval(() => (maxRss = Math.max(maxRss, memory(state.pid).rssMiB)), 50)
    // 200 commits a second across 8 accounts
    const writes = SECONDS * 2 * 200
    const c0 = cpuMs(state.pid)
    // the subscribers' own CPU (this process's when they read here)
    const clientCpu = () => hosts.reduce((a, h) => a + cpuMs(h.pid ?? process.pid), 0)
    const cc0 = clientCpu()
    const t0 = performance.now()
    let sent = 0
    const writeMs = []
    await Promise.all(
      sessions.map(async (s, w) => {
        for (let i = w; i < writes; i += 8) {
          const due = t0 + (i * 1000) / 200
          if (due > performance.now()) await sleep(due - performance.now())
          const w0 = performance.now()
          const r = await x.call('com.atproto.repo.createRecord', {
            token: s.accessJwt,
            body: {
              repo: s.did,
              collection: 'app.bsky.feed.like',
              record: {
                $type: 'app.bsky.feed.like',
                subject: { uri: `at://${s.did}/app.bsky.feed.post/x`, cid: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm' },
                createdAt: new Date().toISOString(),
              },
            },
          })
          answered.set(r.commit.rev, performance.timeOrigin + performance.now())
          writeMs.push(performance.now() - w0)
          sent++
        }
      }),
    )
    const elapsed = performance.now() - t0
    for (let i = 0; i < 200 && (await delivered()) < sent * subs; i++) await sleep(50)
    clearInterval(rssTimer)
    const cpu = cpuMs(state.pid) - c0
    const subscriberCpu = clientCpu() - cc0
    let frames = 0
    const lags = []
    for (const r of await Promise.all(hosts.map((h) => h.finish(answered)))) {
      frames += r.frames
      for (const l of r.lags) lags.push(l)
    }
    lags.sort((a, b) => a - b)
    emit({
      curve: 'firehose',
      subscribers: subs,
      commitsPerSec: +(sent / (elapsed / 1000)).toFixed(0),
      commits: sent,
      framesExpected: sent * subs,
      framesDelivered: frames,
      lagP50Ms: +percentile(lags, 50).toFixed(2),
      lagP99Ms: +percentile(lags, 99).toFixed(2),
      cpuMsPerCommit: +(cpu / sent).toFixed(2),
      subscriberCpuMsPerCommit: +(subscriberCpu / sent).toFixed(2),
      // the writers are 8 sequential chains: 200 commits/s needs answers within 40 ms
      writeP50Ms: +percentile(
        writeMs.sort((a, b) => a - b),
        50,
      ).toFixed(1),
      // the machine's 1-minute load average when the point was taken (2 cores, shared)
      load: +os.loadavg()[0].toFixed(1),
      rssMiB: +maxRss.toFixed(1),
      slowSubscriberClosed: slow.readyState !== WebSocket.OPEN,
    })
    slow.terminate()
    await x.close()
    await state.dispose()
  }
}

if (only.includes('repo')) await repoCurve()
if (only.includes('accounts')) await accountsCurve()
if (only.includes('firehose')) await firehoseCurve()
if (only.includes('backfill')) await backfillCurve()
const { writeReport } = await import('./lib/scale-report.js')
await writeReport(points, { quick, db: dbKind, jsonl })
process.exit(0)
