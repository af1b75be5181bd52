// PDS_DNS_NAMESERVERS for the operator's own endpoints (the PLC directory, relays, the AppView,
// the email API, S3): when set, every HTTP request this process makes resolves its host there,
// not through the system's resolver. Requests to addresses a caller chose go through the
// outbound guard, which resolves through the same servers and vets each address as well.
import { lookup as systemLookup, type LookupAddress, type LookupOptions } from 'node:dns'
import { Agent as HttpsAgent } from 'node:https'
import { Resolver } from 'node:dns/promises'
import { isIP } from 'node:net'
import { http } from '../node-http.js'
import { undici } from '../outbound.js'

export type Address = { address: string; family: number }
type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void

/** a resolver asking only `nameservers` (ip or ip:port), 3 s per try, two tries */
export function nameserverResolver(nameservers: string[]): Resolver {
  const resolver = new Resolver({ timeout: 3000, tries: 2 })
  resolver.setServers(nameservers)
  return resolver
}

/**
 * every A and AAAA address of `hostname` from `resolver`, or the system's resolver without one;
 * address literals and localhost need none
 */
export async function resolveAddresses(resolver: Resolver | undefined, hostname: string): Promise<Address[]> {
  const host = hostname.replace(/^\[|\]$/g, '')
  const family = isIP(host)
  if (family) return [{ address: host, family }]
  // RFC 6761: these names are this machine and never go to DNS
  if (/(^|\.)localhost\.?$/i.test(host)) {
    return [
      { address: '127.0.0.1', family: 4 },
      { address: '::1', family: 6 },
    ]
  }
  if (!resolver) {
    return new Promise((resolve, reject) => systemLookup(host, { all: true }, (err, list) => (err ? reject(err) : resolve(list))))
  }
  const [v4, v6] = await Promise.all([
    resolver.resolve4(host).then(
      (l) => l.map((address) => ({ address, family: 4 })),
      () => [],
    ),
    resolver.resolve6(host).then(
      (l) => l.map((address) => ({ address, family: 6 })),
      () => [],
    ),
  ])
  return [...v4, ...v6]
}

/** a `lookup` for net.connect, http(s).Agent and undici's connector that asks only `nameservers` */
export function nameserverLookup(nameservers: string[]) {
  const resolver = nameserverResolver(nameservers)
  return (hostname: string, options: LookupOptions | number | LookupCallback, callback?: LookupCallback) => {
    const cb = (typeof options === 'function' ? options : callback)!
    const opts: LookupOptions = typeof options === 'object' ? options : typeof options === 'number' ? { family: options } : {}
    resolveAddresses(resolver, hostname).then(
      (found) => {
        const want = opts.family === 'IPv4' ? 4 : opts.family === 'IPv6' ? 6 : Number(opts.family ?? 0)
        const ok = found.filter((a) => !want || a.family === want)
        if (!ok.length) {
          const err: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname} (PDS_DNS_NAMESERVERS)`)
          err.code = 'ENOTFOUND'
          return cb(err, '')
        }
        if (opts.all) cb(null, ok)
        else cb(null, ok[0].address, ok[0].family)
      },
      (err: NodeJS.ErrnoException) => cb(err, ''),
    )
  }
}

/**
 * Makes every request through undici's global dispatcher (Node's fetch and undici's request both
 * use it) resolve hosts through `nameservers`. Process-wide, as the system's resolver is; returns
 * the undo, which puts the previous dispatcher back.
 */
export async function useNameserversForHttp(nameservers: string[]): Promise<() => Promise<void>> {
  const { Agent, getGlobalDispatcher, setGlobalDispatcher } = await undici()
  const previous = getGlobalDispatcher()
  const agent = new Agent({ connect: { lookup: nameserverLookup(nameservers) } })
  setGlobalDispatcher(agent)
  return async () => {
    if (getGlobalDispatcher() === agent) setGlobalDispatcher(previous)
    await agent.close()
  }
}

/**
 * the AWS SDK's `requestHandler` options for an S3 client: node:http(s) agents resolving through
 * `nameservers`; undefined (the SDK's default) when none are set
 */
export function s3RequestHandler(nameservers: string[] | undefined) {
  if (!nameservers?.length) return undefined
  const lookup = nameserverLookup(nameservers) as never
  return { httpAgent: new http.Agent({ keepAlive: true, lookup }), httpsAgent: new HttpsAgent({ keepAlive: true, lookup }) }
}
