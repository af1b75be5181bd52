// Push registration for the notification service a call names: the configured AppView when it is
// that service, else the `#bsky_notif` endpoint of the service DID's document (through the
// outbound guard: the app chose it). The token is addressed to that service for the method.
import type { Services } from '../context.js'
import { xrpcError } from '../errors.js'
import { serviceEndpoint } from '../identity/did-resolver.js'
import { forwardCall } from './call.js'
import type { Target } from './targets.js'

type Deps = Pick<Services, 'config' | 'db' | 'tokenKeys' | 'outbound' | 'logger' | 'didResolver'>

export async function forwardPush(deps: Deps, nsid: string, iss: string, body: { serviceDid: string }): Promise<void> {
  const did = body.serviceDid
  let target: Target
  if (deps.config.appView?.did === did) {
    target = { did, url: deps.config.appView.url, trusted: true, ref: `${did}#bsky_notif` }
  } else {
    const doc = await deps.didResolver.resolve(did)
    const url = doc && serviceEndpoint(doc, '#bsky_notif')
    if (!url) throw xrpcError('InvalidRequest', `invalid notification service details in did document: ${did}`)
    target = { did, url, trusted: false, ref: `${did}#bsky_notif` }
  }
  const res = await forwardCall(deps, { target, nsid, iss, body })
  res.stream.resume()
}
