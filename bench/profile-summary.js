#!/usr/bin/env node
// Summarize a V8 .cpuprofile (from `node bench/run.js --profile`): self time by function and by
// package, top N; with --inclusive, time spent in each function and everything it called.
//
//   node bench/profile-summary.js <file.cpuprofile> [N] [--window S] [--skip S] [--inclusive]
//
// --window S keeps only the busiest S seconds of the profile (the fewest idle samples), so a
// scenario's few seconds of load are read apart from start-up and the quiet time around them;
// --skip S ignores the first S seconds (start-up) when looking for that window. Percentages are
// of the busy time; the idle share of the window is printed apart.
import { readFileSync } from 'node:fs'

const argv = process.argv.slice(2)
const opt = (name) => {
  const i = argv.indexOf(name)
  if (i < 0) return undefined
  const v = argv[i + 1]
  argv.splice(i, 2)
  return v
}
const windowS = opt('--window')
const skipS = opt('--skip')
const inclusive = argv.includes('--inclusive')
const [file, n = '25'] = argv.filter((a) => a !== '--inclusive')
if (!file) {
  process.stderr.write('usage: node bench/profile-summary.js <file.cpuprofile> [N] [--window S] [--skip S] [--inclusive]\n')
  process.exit(2)
}
const prof = JSON.parse(readFileSync(file, 'utf8'))
const byId = new Map(prof.nodes.map((node) => [node.id, node]))
const parent = new Map()
for (const node of prof.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
const isIdle = (id) => byId.get(id).callFrame.functionName === '(idle)'

// sample i covers [at[i], at[i + 1])
const at = []
let t = prof.startTime
for (const d of prof.timeDeltas) at.push((t += d))
const span = (i) => (at[i + 1] ?? prof.endTime ?? at[i]) - at[i]

let first = 0
let last = prof.samples.length - 1
if (windowS !== undefined) {
  const width = Number(windowS) * 1e6
  const from = at[0] + Number(skipS ?? 0) * 1e6
  let best = -1
  let busy = 0
  let lo = at.findIndex((x) => x >= from)
  for (let hi = Math.max(lo, 0); lo >= 0 && hi < at.length; hi++) {
    if (!isIdle(prof.samples[hi])) busy += span(hi)
    while (at[hi] - at[lo] > width) {
      if (!isIdle(prof.samples[lo])) busy -= span(lo)
      lo++
    }
    if (busy > best) [best, first, last] = [busy, lo, hi]
  }
}

// each node's function and package, worked out once (inclusive mode asks for every frame of every sample)
const labels = new Map(
  prof.nodes.map(({ id, callFrame: cf }) => {
    const url = cf.url.replace(/^file:\/\//, '')
    const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
    return [
      id,
      {
        fn: `${cf.functionName || '(anonymous)'} ${url.split('/').slice(-2).join('/')}:${cf.lineNumber + 1}`,
        pkg: m ? m[1] : url.includes('/dist/') ? 'ours (dist/)' : url ? url.split('/').slice(-1)[0] : cf.functionName,
      },
    ]
  }),
)

const fns = new Map()
const pkgs = new Map()
const add = (m, k, us) => m.set(k, (m.get(k) ?? 0) + us)
let total = 0
let idle = 0
for (let i = first; i <= last; i++) {
  const id = prof.samples[i]
  const us = span(i)
  if (isIdle(id)) {
    idle += us
    continue
  }
  total += us
  if (!inclusive) {
    add(fns, labels.get(id).fn, us)
    add(pkgs, labels.get(id).pkg, us)
    continue
  }
  // each frame once per sample, however deep the recursion
  const seenFns = new Set()
  const seenPkgs = new Set()
  for (let x = id; x !== undefined; x = parent.get(x)) {
    const { fn: f, pkg: p } = labels.get(x)
    if (!seenFns.has(f)) {
      seenFns.add(f)
      add(fns, f, us)
    }
    if (!seenPkgs.has(p)) {
      seenPkgs.add(p)
      add(pkgs, p, us)
    }
  }
}
const top = (m) =>
  [...m.entries()]
    .filter(([k]) => !k.startsWith('(idle)'))
    .sort((a, b) => b[1] - a[1])
    .slice(0, Number(n))
    .map(([k, us]) => `${((100 * us) / total).toFixed(1).padStart(5)}%  ${k}`)
    .join('\n')
const scope =
  windowS === undefined
    ? 'the whole profile'
    : `the busiest ${((at[last] - at[first]) / 1e6).toFixed(2)} s (from ${((at[first] - at[0]) / 1e6).toFixed(2)} s)`
const idlePct = ((100 * idle) / Math.max(1, idle + total)).toFixed(1)
process.stdout.write(
  `${scope}: ${(total / 1000).toFixed(0)} ms busy, ${idlePct}% idle; ${inclusive ? 'inclusive' : 'self'} time\n\n` +
    `by package:\n${top(pkgs)}\n\nby function:\n${top(fns)}\n`,
)
