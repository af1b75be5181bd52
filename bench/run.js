#!/usr/bin/env node
// `make bench` / `make bench-compare`: drive a PDS through the standard com.atproto API and
// report, per scenario, ops, errors, throughput, p50/p99 latency and the server's CPU ms per op
// (from /proc/<pid>/stat of the server process), plus the server's RSS idle, after and peak.
//
//   node bench/run.js [--quick] [--db sqlite|postgres] [--only key,key] [--target ours|reference]
//   node bench/run.js --compare [--quick] [--pairs 2] [--only key,key]
//   --profile: ours runs with --cpu-prof (profiles in bench/results/profiles/)
//   --ours-dir <checkout>: run ours from another built checkout
//
// Loopback only; every scenario runs for a fixed time or count and the run stops by itself.
import { mkdirSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { scrypt, randomBytes } from 'node:crypto'
import { memory } from './lib/proc.js'
import { fmt, median, table } from './lib/report.js'
import { SCENARIOS, Target, profile, runScenario } from './lib/scenarios.js'
import { RESULTS, killAll, startOurs, startPeer } from './lib/servers.js'
import { runMigrationFlow } from './lib/migration.js'

const argv = process.argv.slice(2)
const flag = (name) => argv.includes(name)
const opt = (name, dflt) => {
  const i = argv.indexOf(name)
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : dflt
}
const quick = flag('--quick') || process.env.QUICK === '1'
const compare = flag('--compare')
const db = opt('--db', 'sqlite') || 'sqlite'
const pairs = Number(opt('--pairs', '2'))
const only = opt('--only', '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean)
const targetKind = opt('--target', 'ours')
const cpuProf = flag('--profile')
// another built checkout of ours (e.g. a branch to measure before it merges)
const oursDir = opt('--ours-dir', undefined)
const p = profile(quick)
const scenarios = only.length ? SCENARIOS.filter((s) => only.some((o) => s.key.startsWith(o))) : SCENARIOS
// the migration flow starts its own two servers of ours (and a PLC directory): it runs last, ours only
const withMigration = only.length === 0 || only.some((o) => 'migration'.startsWith(o))
const migrationSize = quick ? { records: 1000, blobs: 10 } : { records: 10_000, blobs: 100 }
async function migration() {
  log(`  migration flow (${migrationSize.records} records, ${migrationSize.blobs} blobs of 100 KiB) ...`)
  const r = await runMigrationFlow({ db, ...migrationSize, log })
  log(`    ${r.status}: ${r.note ?? ''}`)
  return r
}

// a hard stop for the whole run, whatever happens
const HARD_LIMIT_MIN = compare ? 60 : 30
setTimeout(() => {
  process.stderr.write(`bench: hard limit of ${HARD_LIMIT_MIN} min reached, stopping\n`)
  killAll()
  process.exit(3)
}, HARD_LIMIT_MIN * 60_000).unref()

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    killAll()
    process.exit(130)
  })
}

const log = (msg) => process.stderr.write(`${msg}\n`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** The password hash alone: scrypt N=2^14 r=8 p=1, 64 bytes (ours and the reference's). */
async function measureScrypt(n) {
  const hash = () =>
    new Promise((resolve, reject) =>
      scrypt('bench-password', randomBytes(16), 64, { N: 16384, r: 8, p: 1, maxmem: 64 * 1024 * 1024 }, (e, k) =>
        e ? reject(e) : resolve(k),
      ),
    )
  await hash() // warm
  const c0 = process.cpuUsage()
  const t0 = performance.now()
  for (let i = 0; i < n; i++) await hash()
  const c = process.cpuUsage(c0)
  return { cpuMs: (c.user + c.system) / 1000 / n, wallMs: (performance.now() - t0) / n, n }
}

async function start(kind, label) {
  log(`starting ${label}...`)
  const server =
    kind === 'reference'
      ? await startPeer({ label })
      : await startOurs({ db, label, cpuProf, dir: oursDir ? path.resolve(oursDir) : undefined })
  await sleep(2000) // settle before the idle figure
  const idle = memory(server.pid)
  log(`${label}: pid ${server.pid} at ${server.url}, idle RSS ${fmt(idle.rssMiB)} MiB`)
  return { server, target: new Target(server), idle }
}

// "after" is read once the client has gone and the server has been quiet this long: what it holds
// at rest after the load, as a server may give memory back when it goes quiet (ours does, after 1 s)
const AFTER_QUIET_MS = 5000

async function finish({ server, target, idle }) {
  await target.close()
  await sleep(AFTER_QUIET_MS)
  const after = memory(server.pid)
  await server.stop()
  return { idleMiB: idle.rssMiB, afterMiB: after.rssMiB, peakMiB: after.peakMiB }
}

function machine() {
  const cpus = os.cpus()
  return {
    date: new Date().toISOString(),
    host: os.hostname(),
    cpu: `${cpus.length} x ${cpus[0]?.model ?? '?'}`,
    memGiB: +(os.totalmem() / 2 ** 30).toFixed(1),
    kernel: os.release(),
    node: process.version,
  }
}

function saveJson(name, data) {
  mkdirSync(RESULTS, { recursive: true })
  const file = path.join(RESULTS, `${new Date().toISOString().replace(/[:.]/g, '-')}-${name}.json`)
  writeFileSync(file, JSON.stringify(data, null, 2))
  return file
}

const pct = (x) => (Number.isFinite(x) ? `${fmt(100 * x, 0)}%` : '-')
/**
 * how busy the server's JavaScript thread and the machine's cores were, and the load client's CPU
 * per op: a server whose one thread is busy throughout is at its limit, whatever the rest
 */
const busyNote = (r) =>
  r.status === 'ok'
    ? ` (server thread ${pct(r.mainThreadBusy)} busy, machine ${pct(r.machineBusy)}, client ${fmt(r.clientCpuMsPerOp, 2)} ms/op)`
    : ''

const valueCol = (r) => (r.metric === 'req/s' ? '' : `${fmt(r.value, r.metric === 'MB/s' || r.metric === 's' ? 2 : 0)} ${r.metric}`)

function singleTable(results) {
  return table(
    [
      'scenario',
      'ops',
      'errors',
      'req/s',
      'throughput',
      'p50 ms',
      'p99 ms',
      'CPU ms/op',
      'thread busy',
      'machine busy',
      'client CPU ms/op',
      'note',
    ],
    results.map((r) =>
      r.status === 'ok' || r.status === 'failed'
        ? [
            r.scenario,
            r.ops ?? '-',
            r.errors ?? '-',
            fmt(r.reqPerS),
            valueCol(r),
            fmt(r.p50),
            fmt(r.p99),
            fmt(r.cpuMsPerOp, 2),
            pct(r.mainThreadBusy),
            pct(r.machineBusy),
            fmt(r.clientCpuMsPerOp, 2),
            r.status === 'failed' ? `FAILED ${r.note ?? Object.keys(r.errorSamples ?? {})[0] ?? ''}` : (r.note ?? ''),
          ]
        : [r.scenario, '-', '-', '-', '-', '-', '-', '-', '-', '-', 'n/a'],
    ),
  )
}

/** The targets a single run can judge on its own (relative to the hash, absolute memory). */
function ownTargets(results, hash, mem) {
  const by = (k) => results.find((r) => r.key === k && r.status === 'ok')
  const lines = [`scrypt hash alone: ${fmt(hash.cpuMs)} ms CPU (${fmt(hash.wallMs)} ms wall, ${hash.n} hashes)`]
  const login = by('createSession')
  if (login) {
    const over = (login.cpuMsPerOp - hash.cpuMs) / hash.cpuMs
    lines.push(
      `login: createSession ${fmt(login.cpuMsPerOp)} ms CPU = hash ${over >= 0 ? '+' : ''}${fmt(over * 100)}% (target <= +10%) ${over <= 0.1 ? 'OK' : 'MISS'}`,
    )
  }
  const wrong = by('createSession.wrongPassword')
  const unknown = by('createSession.unknownHandle')
  if (wrong && unknown) {
    const r = unknown.cpuMsPerOp / wrong.cpuMsPerOp
    lines.push(
      `unknown handle vs wrong password: ${fmt(unknown.cpuMsPerOp)} vs ${fmt(wrong.cpuMsPerOp)} ms CPU (x${fmt(r, 2)}; same cost expected) ${Math.abs(r - 1) <= 0.15 ? 'OK' : 'MISS'}`,
    )
  }
  const ca = by('createAccount')
  if (ca) {
    const beyond = ca.cpuMsPerOp - hash.cpuMs
    lines.push(
      `createAccount: ${fmt(ca.cpuMsPerOp)} ms CPU = hash ${beyond >= 0 ? '+' : '-'} ${fmt(Math.abs(beyond))} ms (target <= hash + 20 ms) ${beyond <= 20 ? 'OK' : 'MISS'}`,
    )
  }
  const gs = by('getSession')
  const pre = by('cors.preflight')
  if (gs && pre)
    lines.push(
      `CORS preflight: ${fmt(pre.cpuMsPerOp, 3)} ms CPU per op vs getSession ${fmt(gs.cpuMsPerOp, 3)} (target: no more) ${pre.cpuMsPerOp <= gs.cpuMsPerOp ? 'OK' : 'MISS'}`,
    )
  // a space write beside the public one from the same run: no target, just where it stands
  for (const [n, who] of [
    ['one', 'one account'],
    ['eight', '8 accounts'],
  ]) {
    const pub = by(`createRecord.${n}`)
    const space = by(`createRecord.space.${n}`)
    if (pub && space)
      lines.push(
        `space createRecord vs createRecord, ${who}: ${fmt(space.reqPerS)} vs ${fmt(pub.reqPerS)} req/s, p50 ${fmt(space.p50)} vs ${fmt(pub.p50)} ms, ${fmt(space.cpuMsPerOp, 2)} vs ${fmt(pub.cpuMsPerOp, 2)} CPU ms/op`,
      )
  }
  const lr2 = by('listRecords.small')
  const lr10 = by('listRecords.large')
  if (lr2 && lr10) lines.push(`listRecords flatness: 10,000 / 2,000 CPU per op = x${fmt(lr10.cpuMsPerOp / lr2.cpuMsPerOp, 2)} (flat is ~1)`)
  if (mem)
    lines.push(
      `memory: RSS idle ${fmt(mem.idleMiB)} MiB (target <= 100) ${mem.idleMiB <= 100 ? 'OK' : 'MISS'}, after ${fmt(mem.afterMiB)} MiB, peak ${fmt(mem.peakMiB)} MiB`,
    )
  return lines.join('\n')
}

async function single() {
  const kind = targetKind === 'reference' ? 'reference' : 'ours'
  const label = kind === 'reference' ? 'reference' : `ours-${db}`
  log(`bench: ${label}, ${quick ? 'QUICK' : 'full'} run, ${scenarios.length} scenarios`)
  const hash = await measureScrypt(quick ? 10 : 30)
  const run = await start(kind, label)
  const results = []
  try {
    for (const s of scenarios) {
      log(`  ${s.name} ...`)
      const r = await runScenario(run.target, s, p)
      log(
        `    ${r.status}${r.status === 'ok' ? `: ${fmt(r.reqPerS)} req/s, ${fmt(r.cpuMsPerOp, 2)} CPU ms/op, ${r.errors} errors` : ` ${r.note ?? ''}`}`,
      )
      results.push(r)
    }
  } finally {
    var mem = await finish(run)
  }
  if (kind === 'ours' && withMigration) results.push(await migration())
  const out = [
    `\n${label} (${quick ? 'QUICK' : 'full'} run) on ${machine().cpu}`,
    singleTable(results),
    '',
    ownTargets(results, hash, mem),
  ].join('\n')
  process.stdout.write(`${out}\n`)
  const file = saveJson(label, { machine: machine(), quick, db, server: kind, hash, memory: mem, results })
  log(`results: ${file}`)
  return results.some((r) => r.status === 'failed') ? 1 : 0
}

const TARGETS = {
  getSession: 3,
  refreshSession: 3,
  'createRecord.one': 3,
  'createRecord.eight': 4,
  applyWrites: 4,
  getRecord: 3,
  'listRecords.small': 3,
  'listRecords.large': 3,
  getRepo: 5,
  importRepo: 5,
  uploadBlob: 1.5,
}

async function comparison() {
  log(`bench-compare: ours (${db}) vs reference, ${quick ? 'QUICK' : 'full'} run, ${pairs} pairs (A B A B), ${scenarios.length} scenarios`)
  const hash = await measureScrypt(quick ? 10 : 30)
  const A = await start('ours', `ours-${db}`)
  let B
  try {
    B = await start('reference', 'reference')
  } catch (err) {
    await finish(A)
    throw err
  }
  const rows = []
  const raw = []
  let memA, memB
  try {
    for (const s of scenarios) {
      const pairResults = []
      for (let i = 0; i < pairs; i++) {
        log(`  ${s.name} pair ${i + 1}/${pairs} ...`)
        const a = await runScenario(A.target, s, p)
        const b = await runScenario(B.target, s, p)
        log(
          `    ours ${a.status} ${fmt(a.value)} ${s.metric} ${fmt(a.cpuMsPerOp, 2)} ms/op${busyNote(a)} | reference ${b.status} ${fmt(b.value)} ${s.metric} ${fmt(b.cpuMsPerOp, 2)} ms/op${busyNote(b)}`,
        )
        pairResults.push([a, b])
        raw.push(a, b)
      }
      // each side's figures from its own successful runs; ratios only from pairs where both ran
      // the same thing
      const ok = pairResults.filter(([a, b]) => a.status === 'ok' && b.status === 'ok' && a.variant === b.variant)
      const status = (i) => pairResults.map((pr) => pr[i].status).find((x) => x !== 'ok') ?? 'ok'
      const sideOf = (i) => {
        const mine = pairResults.map((pr) => pr[i]).filter((r) => r.status === 'ok')
        return {
          status: status(i),
          value: median(mine.map((r) => r.value)),
          cpuMsPerOp: median(mine.map((r) => r.cpuMsPerOp)),
          p50: median(mine.map((r) => r.p50)),
          errors: pairResults.reduce((n, pr) => n + (pr[i].errors ?? 0), 0),
          variant: mine[0]?.variant,
          note: pairResults[0][i].note,
        }
      }
      const row = {
        key: s.key,
        scenario: s.name,
        metric: s.metric,
        ours: sideOf(0),
        reference: sideOf(1),
        ratio: median(ok.map(([a, b]) => a.value / b.value)),
        cpuRatio: median(ok.map(([a, b]) => b.cpuMsPerOp / a.cpuMsPerOp)),
        target: TARGETS[s.key],
      }
      rows.push(row)
    }
  } finally {
    memA = await finish(A)
    memB = await finish(B)
  }
  if (withMigration) {
    const m = await migration()
    raw.push(m)
    rows.push({
      key: m.key,
      scenario: m.scenario,
      metric: 'wall s',
      ours: { status: m.status, value: m.value, cpuMsPerOp: m.cpuMsPerOp, errors: m.status === 'ok' ? 0 : 1 },
      reference: { status: 'n/a', value: NaN, cpuMsPerOp: NaN, errors: 0 },
      ratio: NaN,
      cpuRatio: NaN,
    })
  }
  const side = (x, metric) =>
    Number.isFinite(x.value) ? `${fmt(x.value, metric === 'MB/s' ? 2 : 1)}${x.status === 'ok' ? '' : ` (${x.status} once)`}` : x.status
  const tbl = table(
    [
      'scenario',
      'metric',
      'ours',
      'reference',
      'ratio',
      'target',
      'CPU ms/op ours',
      'CPU ms/op ref',
      'CPU ratio',
      'errors (ours/ref)',
      'note',
    ],
    rows.map((r) => [
      r.scenario,
      r.metric,
      side(r.ours, r.metric),
      side(r.reference, r.metric),
      Number.isFinite(r.ratio) ? `x${fmt(r.ratio, 2)}` : 'n/a',
      r.target ? `>= x${r.target}${Number.isFinite(r.ratio) ? (r.ratio >= r.target ? ' OK' : ' MISS') : ''}` : '',
      fmt(r.ours.cpuMsPerOp, 2),
      fmt(r.reference.cpuMsPerOp, 2),
      Number.isFinite(r.cpuRatio) ? `x${fmt(r.cpuRatio, 2)}` : 'n/a',
      `${r.ours.errors}/${r.reference.errors}`,
      r.ours.variant && r.reference.variant && r.ours.variant !== r.reference.variant
        ? `not comparable: ${r.ours.variant} vs ${r.reference.variant}`
        : '',
    ]),
  )
  const memLine = `RSS MiB idle / after / peak: ours ${fmt(memA.idleMiB)} / ${fmt(memA.afterMiB)} / ${fmt(memA.peakMiB)}; reference ${fmt(memB.idleMiB)} / ${fmt(memB.afterMiB)} / ${fmt(memB.peakMiB)}; after ratio ours/ref x${fmt(memA.afterMiB / memB.afterMiB, 2)} (target <= x0.3)`
  const oursOnly = raw.filter((r) => r.server.startsWith('ours'))
  const m = machine()
  process.stdout.write(
    [
      `\nbench-compare ${m.date} on ${m.cpu}, ${m.memGiB} GiB (${quick ? 'QUICK' : 'full'}; ratio = median over ${pairs} A/B pairs of ours/reference throughput; CPU ratio = reference CPU ms/op / ours)`,
      tbl,
      '',
      memLine,
      ownTargets(dedupe(oursOnly), hash, memA),
      '',
    ].join('\n'),
  )
  const file = saveJson(`compare-${db}`, { machine: m, quick, db, pairs, hash, memory: { ours: memA, reference: memB }, rows, raw })
  log(`results: ${file}`)
  return 0
}

/** the last result per scenario key */
function dedupe(results) {
  const m = new Map()
  for (const r of results) m.set(r.key, r)
  return [...m.values()]
}

try {
  process.exitCode = compare ? await comparison() : await single()
} catch (err) {
  log(`bench: ${err.stack ?? err}`)
  process.exitCode = 2
}
// undici keep-alive sockets and timers must not hold the process
setTimeout(() => process.exit(process.exitCode ?? 0), 500).unref()
