// Where a forwarded call goes: the service an `atproto-proxy: <did>#<service>` header names (from
// its DID document), or the default the operator configured for the method: reports to the
// report service (else the moderation service), app.bsky.* and chat.bsky.* to the AppView.
import type { Config } from '../config.js'
import { xrpcError } from '../errors.js'
import { serviceEndpoint, type DidResolver } from '../identity/did-resolver.js'

/** `trusted`: configured by the operator, so not subject to the outbound guard; `ref`: the
 *  service as `did#id`, what an `rpc:` permission's audience names */
export type Target = { did: string; url: string; trusted: boolean; ref: string }

// NSID authorities are case-insensitive: `CHAT.bsky.` is chat as much as `chat.bsky.` is
export const inNamespace = (nsid: string, prefix: string) => nsid.toLowerCase().startsWith(prefix)

const REPORT = 'com.atproto.moderation.createreport'

/** the configured service `nsid` goes to without a header, if any */
export function defaultTarget(nsid: string, config: Pick<Config, 'appView' | 'modService' | 'reportService'>): Target | undefined {
  if (nsid.toLowerCase() === REPORT) {
    const svc = config.reportService ?? config.modService
    return svc && { did: svc.did, url: svc.url, trusted: true, ref: `${svc.did}#atproto_labeler` }
  }
  if (!config.appView) return undefined
  if (!inNamespace(nsid, 'app.bsky.') && !inNamespace(nsid, 'chat.bsky.')) return undefined
  const service = inNamespace(nsid, 'chat.bsky.') ? '#bsky_chat' : '#bsky_appview'
  return { did: config.appView.did, url: config.appView.url, trusted: true, ref: config.appView.did + service }
}

/** the default service of `nsid` as an `rpc:` audience (`did#id`), if it has one */
export const defaultServiceRef = (nsid: string, config: Pick<Config, 'appView' | 'modService' | 'reportService'>) =>
  defaultTarget(nsid, config)?.ref

// `<did>#<service id>`: exactly one #, nothing empty, no spaces (as the reference PDS parses it);
// checked before the caller is, so a refusal can name the permission the value asks for
export function proxyRef(value: string): string {
  const hash = value.indexOf('#')
  if (hash <= 0 || hash === value.length - 1 || value.indexOf('#', hash + 1) !== -1 || /\s/.test(value)) {
    throw xrpcError('InvalidRequest', 'atproto-proxy must be <did>#<service id>')
  }
  if (!/^did:[a-z]+:[a-zA-Z0-9._:%-]+$/.test(value.slice(0, hash))) throw xrpcError('InvalidRequest', 'atproto-proxy names no valid DID')
  return value
}

/** the service a `did#id` reference names, from the DID's document */
export async function resolveRef(value: string, resolver: DidResolver): Promise<Target> {
  const hash = proxyRef(value).indexOf('#')
  const did = value.slice(0, hash)
  const doc = await resolver.resolve(did)
  if (!doc) throw xrpcError('InvalidRequest', `could not resolve proxy did ${did}`)
  const url = serviceEndpoint(doc, value.slice(hash))
  if (!url) throw xrpcError('InvalidRequest', 'could not resolve proxy did service url')
  return { did, url, trusted: false, ref: value }
}

/** the header's service when one is named, else the method's default; undefined: neither */
export async function targetOf(
  nsid: string,
  header: string | string[] | undefined,
  deps: { config: Pick<Config, 'appView' | 'modService' | 'reportService'>; didResolver: DidResolver },
): Promise<Target | undefined> {
  if (header !== undefined) return resolveRef(String(header), deps.didResolver)
  return defaultTarget(nsid, deps.config)
}

/** the fragment of a `did#id` reference, with its `#` */
export const serviceIdOf = (ref: string) => ref.slice(ref.indexOf('#'))
