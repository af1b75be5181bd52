#!/usr/bin/env node
// Summarize a V8 .cpuprofile (from `node bench/run.js --profile`): self time by function and by
// package, top N.   node bench/profile-summary.js <file.cpuprofile> [N]
import { readFileSync } from 'node:fs'

const [file, n = '25'] = process.argv.slice(2)
if (!file) {
  process.stderr.write('usage: node bench/profile-summary.js <file.cpuprofile> [N]\n')
  process.exit(2)
}
const prof = JSON.parse(readFileSync(file, 'utf8'))
const byId = new Map(prof.nodes.map((node) => [node.id, node]))
const self = new Map()
const dt = prof.timeDeltas
for (let i = 0; i < prof.samples.length; i++) self.set(prof.samples[i], (self.get(prof.samples[i]) ?? 0) + (dt[i] ?? 0))
const total = [...self.values()].reduce((a, b) => a + b, 0)
const fns = new Map()
const pkgs = new Map()
for (const [id, us] of self) {
  const { callFrame: cf } = byId.get(id)
  const url = cf.url.replace(/^file:\/\//, '')
  const fn = `${cf.functionName || '(anonymous)'} ${url.split('/').slice(-2).join('/')}:${cf.lineNumber + 1}`
  fns.set(fn, (fns.get(fn) ?? 0) + us)
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  const pkg = m ? m[1] : url.includes('/dist/') ? 'ours (dist/)' : url ? url.split('/').slice(-1)[0] : cf.functionName
  pkgs.set(pkg, (pkgs.get(pkg) ?? 0) + us)
}
const top = (m) =>
  [...m.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, Number(n))
    .map(([k, us]) => `${((100 * us) / total).toFixed(1).padStart(5)}%  ${k}`)
    .join('\n')
process.stdout.write(`total ${(total / 1000).toFixed(0)} ms sampled\n\nby package:\n${top(pkgs)}\n\nby function:\n${top(fns)}\n`)
