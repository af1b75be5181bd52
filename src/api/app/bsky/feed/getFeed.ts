// app.bsky.feed.getFeed: a custom feed. The AppView asks the feed's generator for the skeleton
// with the viewer's token, so the token is minted for the generator (`aud` the `did` of the
// feed's generator record, read through the AppView; `lxm` getFeedSkeleton), and the call goes to
// the AppView (or the service an `atproto-proxy` header names) with it, as the reference PDS does.
import { AtUri } from '@atproto/syntax'
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { xrpcError } from '#src/errors.js'
import { forwardCall } from '#src/proxy/call.js'
import { targetOf } from '#src/proxy/targets.js'
import { feedGeneratorDid } from '#src/proxy/feeds.js'

export default method(
  'app.bsky.feed.getFeed',
  (deps: Pick<Services, 'config' | 'db' | 'tokenKeys' | 'outbound' | 'logger' | 'didResolver'>) =>
    async ({ auth, params, req }) => {
      const nsid = 'app.bsky.feed.getFeed'
      const target = await targetOf(nsid, req.headers['atproto-proxy'], deps)
      if (!target || !deps.config.appView) throw xrpcError('InvalidRequest', 'No service configured for app.bsky.feed.getFeed')
      const feedDid = await feedGeneratorDid(deps, new AtUri(params.feed))
      return forwardCall(deps, {
        target,
        nsid,
        iss: auth.credentials.did,
        aud: { did: feedDid, serviceId: '#bsky_fg' },
        lxm: 'app.bsky.feed.getFeedSkeleton',
        query: req.url.includes('?') ? req.url.slice(req.url.indexOf('?')) : '',
        headers: req.headers,
      })
    },
)
