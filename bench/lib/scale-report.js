// bench/SCALE.md (SCALE-<db>.md) and bench/scale-<db>.svg from the points of one `make bench-scale` run: a table per
// curve, and a chart drawn here from the same numbers (plain SVG, no plotting package). The full
// mode (no QUICK=1) writes SCALE-full.md and scale-<db>-full.svg beside them.
import { readFileSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const BENCH = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b']

/** one panel: x on a log scale, one line per series; ys as given */
function panel({ x0, y0, w, h, title, xs, series, yLabel }) {
  const all = series.flatMap((s) => s.ys).filter((v) => Number.isFinite(v))
  const yMax = Math.max(1e-9, ...all) * 1.1
  // a frame may arrive before its write's answer: lags can be below zero
  const yMin = Math.min(0, ...all) * 1.1
  const lx = (v) => Math.log10(v)
  const [xa, xb] = [lx(Math.min(...xs)), lx(Math.max(...xs))]
  const px = (v) => x0 + 50 + ((lx(v) - xa) / Math.max(1e-9, xb - xa)) * (w - 70)
  const py = (v) => y0 + h - 30 - ((v - yMin) / (yMax - yMin)) * (h - 60)
  const out = [
    `<text x="${x0 + w / 2}" y="${y0 + 16}" text-anchor="middle" font-size="13" font-weight="bold">${title}</text>`,
    `<line x1="${x0 + 50}" y1="${y0 + h - 30}" x2="${x0 + w - 20}" y2="${y0 + h - 30}" stroke="#444"/>`,
    `<line x1="${x0 + 50}" y1="${y0 + 30}" x2="${x0 + 50}" y2="${y0 + h - 30}" stroke="#444"/>`,
    `<text x="${x0 + 12}" y="${y0 + h / 2}" font-size="10" transform="rotate(-90 ${x0 + 12} ${y0 + h / 2})" text-anchor="middle">${yLabel}</text>`,
  ]
  for (const v of xs) out.push(`<text x="${px(v)}" y="${y0 + h - 15}" font-size="10" text-anchor="middle">${short(v)}</text>`)
  for (const f of [0, 0.5, 1]) {
    const v = yMin / 1.1 + ((yMax - yMin) / 1.1) * f
    out.push(`<text x="${x0 + 46}" y="${py(v) + 3}" font-size="9" text-anchor="end">${+v.toPrecision(2)}</text>`)
  }
  series.forEach((s, i) => {
    const c = COLORS[i % COLORS.length]
    const pts = xs.map((x, j) => [x, s.ys[j]]).filter(([, y]) => Number.isFinite(y))
    out.push(
      `<polyline fill="none" stroke="${c}" stroke-width="2" points="${pts.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ')}"/>`,
    )
    for (const [x, y] of pts) out.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${c}"/>`)
    out.push(`<text x="${x0 + 60}" y="${y0 + 32 + i * 12}" font-size="10" fill="${c}">${s.name}</text>`)
  })
  return out.join('\n')
}

const short = (v) => (v >= 1e6 ? `${v / 1e6}M` : v >= 1e3 ? `${v / 1e3}k` : String(v))
const rel = (ys) => ys.map((y) => y / ys[0])

export async function writeReport(points, { quick, db, jsonl }) {
  const repo = points.filter((p) => p.curve === 'repo')
  const accts = points.filter((p) => p.curve === 'accounts')
  const hose = points.filter((p) => p.curve === 'firehose')
  const backfill = points.filter((p) => p.curve === 'backfill')
  const panels = []
  const W = 420
  const H = 300
  if (repo.length) {
    const xs = repo.map((p) => p.records)
    panels.push({
      title: 'Repository size: server CPU per op (x the smallest)',
      xs,
      yLabel: 'ratio',
      series: [
        { name: 'createRecord', ys: rel(repo.map((p) => p.createRecord.cpuMsPerOp)) },
        { name: 'applyWrites (per record)', ys: rel(repo.map((p) => p.applyWrites.cpuMsPerUnit)) },
        { name: 'getRecord', ys: rel(repo.map((p) => p.getRecord.cpuMsPerOp)) },
        { name: 'listRecords', ys: rel(repo.map((p) => p.listRecords.cpuMsPerOp)) },
      ],
    })
    panels.push({
      title: 'getRepo / importRepo: memory and first byte',
      xs,
      yLabel: 'MiB / ms',
      series: [
        { name: 'getRepo RSS growth (MiB)', ys: repo.map((p) => p.getRepo.rssGrowthMiB) },
        { name: 'getRepo first byte (ms)', ys: repo.map((p) => p.getRepo.firstByteMs) },
      ],
    })
  }
  if (accts.length) {
    panels.push({
      title: 'Accounts: server CPU per op (x the smallest)',
      xs: accts.map((p) => p.accounts),
      yLabel: 'ratio',
      series: [
        { name: 'getSession', ys: rel(accts.map((p) => p.getSession.cpuMsPerOp)) },
        { name: 'createSession', ys: rel(accts.map((p) => p.createSession.cpuMsPerOp)) },
        { name: 'createRecord', ys: rel(accts.map((p) => p.createRecord.cpuMsPerOp)) },
      ],
    })
  }
  if (hose.length) {
    panels.push({
      title: 'Firehose at 200 commits/s: lag (ms)',
      xs: hose.map((p) => p.subscribers),
      yLabel: 'ms',
      series: [
        { name: 'p50 lag', ys: hose.map((p) => p.lagP50Ms) },
        { name: 'p99 lag', ys: hose.map((p) => p.lagP99Ms) },
      ],
    })
  }
  const cols = 2
  const rows = Math.ceil(panels.length / cols)
  const svg = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${cols * W}" height="${rows * H + 24}" font-family="sans-serif">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="8" y="16" font-size="11">make bench-scale${quick ? ' QUICK=1' : ''}, ${db}, ${new Date().toISOString().slice(0, 16)} UTC</text>`,
    ...panels.map((p, i) => panel({ ...p, x0: (i % cols) * W, y0: 24 + Math.floor(i / cols) * H, w: W, h: H })),
    '</svg>',
  ].join('\n')
  // the full mode keeps its own files: a QUICK=1 run does not overwrite its larger sizes
  const full = quick ? '' : '-full'
  const svgName = `scale-${db}${full}.svg`
  writeFileSync(path.join(BENCH, svgName), svg)

  const md = [
    `# make bench-scale results (${db})`,
    '',
    `Run: ${new Date().toISOString().slice(0, 16)} UTC${quick ? ', QUICK=1' : ''}; raw points: ${[jsonl]
      .flat()
      .map((f) => `\`${path.relative(path.dirname(BENCH), path.resolve(f))}\``)
      .join(', ')} (not committed). Chart: [${svgName}](${svgName}).`,
    '',
  ]
  const loads = points.map((p) => p.load1).filter((v) => v !== undefined)
  if (loads.length) {
    md.push(
      `Machine load (1-minute average) at the points: ${Math.min(...loads).toFixed(1)} to ${Math.max(...loads).toFixed(1)} on ${os.cpus().length} cores. CPU per op is the server's own; the wall-clock figures (start to first answer, records/s, lags) stretch with the load.`,
      '',
    )
  }
  if (repo.length) {
    md.push(
      '## Repository size',
      '',
      '| records | createRecord CPU ms/op | applyWrites records/s (CPU ms/record) | getRecord CPU ms/op | listRecords CPU ms/op | getRepo MB/s, first byte ms, RSS growth MiB | importRepo records/s, RSS growth MiB, peak RSS MiB |',
      '|---|---|---|---|---|---|---|',
    )
    for (const p of repo) {
      md.push(
        `| ${p.records} | ${p.createRecord.cpuMsPerOp} | ${p.applyWrites.perSec} (${p.applyWrites.cpuMsPerUnit}) | ${p.getRecord.cpuMsPerOp} | ${p.listRecords.cpuMsPerOp} | ${p.getRepo.MBps}, ${p.getRepo.firstByteMs}, ${p.getRepo.rssGrowthMiB} | ${p.importRepo ? `${p.importRepo.recordsPerSec}, ${p.importRepo.rssGrowthMiB}, ${p.importRepo.peakMiB}` : '-'} |`,
      )
    }
    md.push('')
  }
  if (accts.length) {
    md.push(
      '## Accounts',
      '',
      '| accounts | seeded in s | start to first answer ms (server CPU ms by then) | idle RSS MiB | getSession CPU ms/op | createSession CPU ms/op | createRecord CPU ms/op | backfill from 0: events, events/s |',
      '|---|---|---|---|---|---|---|---|',
    )
    for (const p of accts) {
      md.push(
        `| ${p.accounts} | ${p.seedS ?? '-'} | ${p.startMs} (${p.startCpuMs ?? '-'}) | ${p.idleRssMiB} | ${p.getSession.cpuMsPerOp} | ${p.createSession.cpuMsPerOp} | ${p.createRecord.cpuMsPerOp} | ${p.backfill.events}, ${p.backfill.perSec} |`,
      )
    }
    md.push('')
  }
  if (hose.length) {
    md.push(
      '## Firehose (writers at 200 commits/s, one subscriber that reads nothing)',
      '',
      '| subscribers | commits/s | frames delivered / expected | lag p50 ms | lag p99 ms | server CPU ms/commit | subscriber processes CPU ms/commit | write answer p50 ms | load average | RSS MiB | the non-reader cut off |',
      '|---|---|---|---|---|---|---|---|---|---|---|',
    )
    for (const p of hose) {
      md.push(
        `| ${p.subscribers} | ${p.commitsPerSec} | ${p.framesDelivered} / ${p.framesExpected} | ${p.lagP50Ms} | ${p.lagP99Ms} | ${p.cpuMsPerCommit} | ${p.subscriberCpuMsPerCommit ?? '-'} | ${p.writeP50Ms ?? '-'} | ${p.load ?? '-'} | ${p.rssMiB} | ${p.slowSubscriberClosed} |`,
      )
    }
    md.push('')
  }
  if (backfill.length) {
    md.push(
      '## Backfill (one consumer from cursor 0 over a log of real #commit frames)',
      '',
      '| events | events/s | MB/s | server CPU µs/event | server RSS growth MiB |',
      '|---|---|---|---|---|',
    )
    for (const p of backfill) md.push(`| ${p.events} | ${p.perSec} | ${p.MBps} | ${p.cpuUsPerEvent} | ${p.rssGrowthMiB} |`)
    md.push('')
  }
  // formatted as the project's lint checks committed reports
  const prettier = await import('prettier')
  const file = path.join(BENCH, db === 'sqlite' ? `SCALE${full}.md` : `SCALE-${db}${full}.md`)
  writeFileSync(file, await prettier.format(md.join('\n'), { ...(await prettier.resolveConfig(file)), filepath: file }))
}

// `node bench/lib/scale-report.js [--quick] <points.jsonl>...`: the report again from saved points,
// e.g. the curves of a full mode run one by one (`--only repo`, then `--only accounts`)
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2)
  const files = args.filter((a) => !a.startsWith('--'))
  const points = files.flatMap((f) =>
    readFileSync(f, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l)),
  )
  await writeReport(points, { quick: args.includes('--quick'), db: points[0]?.db ?? 'sqlite', jsonl: files })
}
