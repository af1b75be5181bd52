// What per-address budgets count against. One IPv6 subscriber is usually handed a whole /64 (and
// picks any address in it at will), so an IPv6 address counts as its /64; an IPv4 address, also
// written IPv4-mapped (::ffff:a.b.c.d), counts as itself.
import { isIP } from 'node:net'

export function addressKey(address: string): string {
  const plain = address.split('%')[0]
  if (isIP(plain) !== 6) return plain
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(plain)
  if (mapped) return mapped[1]
  const groups = ipv6Groups(plain)
  if (!groups) return plain
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`
}

function ipv6Groups(address: string): number[] | undefined {
  let text = address.toLowerCase()
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number)
    text = text.slice(0, -dotted[0].length) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head, tail] = text.split('::')
  const part = (s: string | undefined) => (s ? s.split(':').map((x) => parseInt(x, 16)) : [])
  const h = part(head)
  const t = part(tail)
  if (tail === undefined) return h.length === 8 ? h : undefined
  return [...h, ...Array<number>(8 - h.length - t.length).fill(0), ...t]
}
