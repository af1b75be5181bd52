// A custom feed's generator: the `did` its `app.bsky.feed.generator` record names, read from the
// AppView (which indexes every repository), so a viewer's token can be minted for the generator.
import type { Services } from '../context.js'
import { xrpcError } from '../errors.js'
import { readCapped, request } from '../outbound.js'
import type { AtUri } from '@atproto/syntax'

const MAX_RECORD_BYTES = 64 * 1024

export async function feedGeneratorDid(deps: Pick<Services, 'config' | 'logger'>, feed: AtUri): Promise<string> {
  const appView = deps.config.appView
  if (!appView) throw xrpcError('InvalidRequest', 'No service configured for app.bsky.feed.getFeed')
  const qs = new URLSearchParams({ repo: feed.hostname, collection: feed.collection, rkey: feed.rkey })
  let res
  try {
    res = await request(`${appView.url}/xrpc/com.atproto.repo.getRecord?${qs}`, {
      headersTimeout: deps.config.proxy.timeoutMs,
      bodyTimeout: deps.config.proxy.timeoutMs,
    })
  } catch (err) {
    deps.logger.warn({ err: String(err) }, 'AppView unreachable for a feed generator record')
    throw xrpcError('UpstreamFailure', 'The AppView could not be reached')
  }
  const bytes = await readCapped(res.body, MAX_RECORD_BYTES).catch(() => undefined)
  if (res.statusCode === 400 || res.statusCode === 404) throw xrpcError('UnknownFeed', 'could not resolve feed did')
  if (res.statusCode !== 200 || !bytes) throw xrpcError('UpstreamFailure', `The AppView answered ${res.statusCode}`)
  let did: unknown
  try {
    did = (JSON.parse(bytes.toString('utf8')) as { value?: { did?: unknown } }).value?.did
  } catch {
    did = undefined
  }
  if (typeof did !== 'string' || !/^did:[a-z]+:[a-zA-Z0-9._:%-]+$/.test(did)) throw xrpcError('UnknownFeed', 'could not resolve feed did')
  return did
}
