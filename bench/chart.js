// Draws bench/RESULTS.md's chart: ours / reference per scenario, throughput and CPU per op, as an
// SVG with no dependencies. Input: a `make bench-compare` result (bench/results/*-compare-*.json)
// or the committed figures of the published table (the default).
// Usage: node bench/chart.js [compare.json] [out.svg]
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const input = process.argv[2] ?? path.join(here, 'figures/compare-2026-11-24.json')
const output = process.argv[3] ?? path.join(here, 'results-chart.svg')

const { rows } = JSON.parse(readFileSync(input, 'utf8'))
const bars = rows
  .map((r) => ({
    name: r.scenario,
    speed: r.ratio ?? r.ours.value / r.reference.value,
    cpu: r.reference.cpuMsPerOp / r.ours.cpuMsPerOp,
  }))
  .filter((b) => Number.isFinite(b.speed) && b.speed > 0)

// a log scale: x1 (parity) to x20 fits every ratio the bench has shown
const ticks = [0.5, 1, 2, 5, 10, 20]
const W = 760
const left = 210
const right = 40
const rowH = 30
const top = 56
const H = top + bars.length * rowH + 40
const lo = Math.log(ticks[0])
const hi = Math.log(ticks.at(-1))
const x = (v) => left + ((Math.log(Math.min(Math.max(v, ticks[0]), ticks.at(-1))) - lo) / (hi - lo)) * (W - left - right)
const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;')
const fmt = (v) => `x${v >= 10 ? v.toFixed(1) : v.toFixed(2)}`

const out = []
out.push(
  `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
)
out.push(`<rect width="${W}" height="${H}" fill="#fff"/>`)
out.push(`<text x="${left}" y="20" font-size="14" font-weight="bold">ours / reference PDS (log scale; right of x1 = ours better)</text>`)
out.push(`<rect x="${left}" y="30" width="12" height="10" fill="#2f6fb3"/><text x="${left + 16}" y="39">throughput</text>`)
out.push(
  `<rect x="${left + 100}" y="30" width="12" height="10" fill="#e39b2d"/><text x="${left + 116}" y="39">CPU per op (reference / ours)</text>`,
)
for (const t of ticks) {
  out.push(`<line x1="${x(t)}" y1="${top - 4}" x2="${x(t)}" y2="${H - 30}" stroke="${t === 1 ? '#000' : '#ddd'}"/>`)
  out.push(`<text x="${x(t)}" y="${H - 16}" text-anchor="middle">x${t}</text>`)
}
bars.forEach((b, i) => {
  const y = top + i * rowH
  out.push(`<text x="${left - 8}" y="${y + 15}" text-anchor="end">${esc(b.name)}</text>`)
  out.push(`<rect x="${x(1)}" y="${y + 3}" width="${Math.max(1, x(b.speed) - x(1))}" height="11" fill="#2f6fb3"/>`)
  out.push(`<text x="${x(b.speed) + 4}" y="${y + 13}" font-size="10">${fmt(b.speed)}</text>`)
  if (Number.isFinite(b.cpu) && b.cpu > 0) {
    out.push(`<rect x="${x(1)}" y="${y + 15}" width="${Math.max(1, x(b.cpu) - x(1))}" height="8" fill="#e39b2d"/>`)
    out.push(`<text x="${x(b.cpu) + 4}" y="${y + 23}" font-size="9" fill="#8a5a10">${fmt(b.cpu)}</text>`)
  }
})
out.push('</svg>')
writeFileSync(output, out.join('\n') + '\n')
console.log(`wrote ${path.relative(process.cwd(), output)} (${bars.length} scenarios from ${path.relative(process.cwd(), input)})`)
