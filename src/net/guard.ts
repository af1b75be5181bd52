// The one way to reach an address that a caller or someone else's document chose (did:web
// documents, proxy targets, OAuth client metadata, migration destinations). Outside development
// mode: https only, the host resolved first and every loopback, private, link-local, unique-local,
// multicast, reserved or IPv4-mapped address refused, the socket dialled to the vetted address
// itself (so DNS rebinding cannot slip past), and redirects never followed. Operator-configured
// endpoints (PLC directory, AppView, relays, email API) do not come through here.
import { Resolver } from 'node:dns/promises'
import { BlockList, isIP } from 'node:net'
import type * as Undici from 'undici'
import { undici } from '../outbound.js'
import { nameserverResolver, resolveAddresses, type Address } from './dns.js'

/** every refusal and failure before a connection looks the same to the caller */
export class OutboundRefused extends Error {
  readonly code = 'ERR_OUTBOUND_REFUSED'
  constructor() {
    super('destination not allowed')
  }
}

type RequestOptions = Omit<NonNullable<Parameters<typeof Undici.request>[1]>, 'dispatcher' | 'maxRedirections'>

export class OutboundGuard {
  private agent: Promise<Undici.Agent> | undefined
  private resolver: Resolver | undefined
  private txtResolver: Resolver | undefined

  constructor(private opts: { devMode: boolean; nameservers: string[] }) {
    if (opts.nameservers.length) this.resolver = nameserverResolver(opts.nameservers)
  }

  /** development mode: plain http and private addresses are allowed */
  get devMode(): boolean {
    return this.opts.devMode
  }

  /** https, or http in development mode too */
  allowsScheme(url: URL): boolean {
    return url.protocol === 'https:' || (url.protocol === 'http:' && this.opts.devMode)
  }

  /** GET or POST `url` unless it is refused; a 3xx is returned as it is, never followed */
  async request(url: string | URL, options: RequestOptions = {}): Promise<Undici.Dispatcher.ResponseData> {
    const u = typeof url === 'string' ? new URL(url) : url
    if (!this.allowsScheme(u) || u.username || u.password) throw new OutboundRefused()
    // an address literal is dialled without a lookup, so it is vetted here
    const literal = u.hostname.replace(/^\[|\]$/g, '')
    if (isIP(literal) && !this.allowed(literal)) throw new OutboundRefused()
    const { request } = await undici()
    return request(u, { ...options, dispatcher: await this.dispatcher() }) as Promise<Undici.Dispatcher.ResponseData>
  }

  /** TXT records of `name`, from PDS_DNS_NAMESERVERS when set; each record's strings joined */
  async resolveTxt(name: string): Promise<string[]> {
    this.txtResolver ??= this.resolver ?? new Resolver({ timeout: 3000, tries: 2 })
    return (await this.txtResolver.resolveTxt(name)).map((chunks) => chunks.join(''))
  }

  async close() {
    await (await this.agent)?.close()
  }

  private allowed(address: string): boolean {
    return this.opts.devMode || isPublicAddress(address)
  }

  // made on first use: most servers never fetch anything a caller chose
  private dispatcher(): Promise<Undici.Agent> {
    return (this.agent ??= undici().then(({ Agent }) => new Agent({ connect: { lookup: this.lookup } })))
  }

  // net.connect's lookup hook: the addresses handed back are the only ones the socket may dial
  private lookup = (hostname: string, options: { all?: boolean; family?: number | string }, cb: (...args: any[]) => void) => {
    this.resolve(hostname).then(
      (found) => {
        const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : Number(options.family ?? 0)
        const ok = found.filter((a) => (!family || a.family === family) && this.allowed(a.address))
        if (!ok.length) return cb(new OutboundRefused())
        if (options.all) cb(null, ok)
        else cb(null, ok[0].address, ok[0].family)
      },
      () => cb(new OutboundRefused()),
    )
  }

  /** every address of `hostname`, from PDS_DNS_NAMESERVERS when set, else the system's resolver */
  private resolve(hostname: string): Promise<Address[]> {
    return resolveAddresses(this.resolver, hostname)
  }
}

const refused = new BlockList()
for (const [net, bits] of [
  ['0.0.0.0', 8], // "this network", 0.0.0.0 included
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  refused.addSubnet(net, bits, 'ipv4')
}
for (const [net, bits] of [
  ['::', 96], // unspecified, loopback, IPv4-compatible
  ['64:ff9b:1::', 48], // local-use NAT64
  ['100::', 64], // discard
  ['2001::', 23], // IETF protocol assignments (Teredo and others)
  ['2001:db8::', 32],
  ['fc00::', 7], // unique-local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local
  ['ff00::', 8], // multicast
] as const) {
  refused.addSubnet(net, bits, 'ipv6')
}

/** true when an address may be reached from a server-side fetch outside development mode */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address)
  if (family === 4) return !refused.check(address, 'ipv4')
  if (family !== 6) return false
  if (refused.check(address, 'ipv6')) return false
  const g = ipv6Groups(address)
  if (!g) return false
  // IPv4-mapped (::ffff:0:0/96) and IPv4-translated (::ffff:0:0:0/96) addresses never name a
  // service on the internet; a socket given one dials the IPv4 address inside, whatever it is
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) return false
  if (g.slice(0, 4).every((x) => x === 0) && g[4] === 0xffff && g[5] === 0) return false
  const embedded = embeddedIpv4(g)
  return embedded === undefined || !refused.check(embedded, 'ipv4')
}

// NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address a gateway will dial; an
// IPv6-only host reaches public IPv4 services through NAT64, so only a refused one inside counts
function embeddedIpv4(g: number[]): string | undefined {
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return v4(g[6], g[7])
  if (g[0] === 0x2002) return v4(g[1], g[2])
  return undefined
}

function ipv6Groups(address: string): number[] | undefined {
  let text = address.toLowerCase()
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (dotted) {
    const [a, b, c, d] = dotted[1].split('.').map(Number)
    text = text.slice(0, -dotted[1].length) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head, tail] = text.split('::')
  const part = (s: string | undefined) => (s ? s.split(':').map((x) => parseInt(x, 16)) : [])
  const h = part(head)
  const t = part(tail)
  if (tail === undefined) return h.length === 8 ? h : undefined
  return [...h, ...Array(8 - h.length - t.length).fill(0), ...t]
}
