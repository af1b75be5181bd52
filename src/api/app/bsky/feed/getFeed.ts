// app.bsky.feed.getFeed: a custom feed. The AppView asks the feed's generator for the skeleton
// with the viewer's token, so the token is minted for the generator (`aud` the `did` of the
// feed's generator record, read through the AppView; `lxm` getFeedSkeleton), and the call goes to
// the AppView (or the service an `atproto-proxy` header names) with it, as the reference PDS does.
import { AtUri } from '@atproto/syntax'
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { forwardCall } from '../../../../proxy/call.js'
import { targetOf } from '../../../../proxy/targets.js'
import { feedGeneratorDid } from '../../../../proxy/feeds.js'

export default (api: Server, deps: Pick<Services, 'config' | 'db' | 'tokenKeys' | 'outbound' | 'logger' | 'didResolver'>) =>
  api.app.bsky.feed.getFeed<AuthFor<'app.bsky.feed.getFeed'>>(async ({ auth, params, req }) => {
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
  })
