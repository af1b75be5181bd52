// app.bsky.notification.registerPush: forwarded for the account to the notification service the
// body names (`serviceDid`), with a service token addressed to it for this method.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { forwardPush } from '../../../../proxy/push.js'

export default (api: Server, deps: Pick<Services, 'config' | 'db' | 'tokenKeys' | 'outbound' | 'logger' | 'didResolver'>) =>
  api.app.bsky.notification.registerPush<AuthFor<'app.bsky.notification.registerPush'>>(async ({ auth, input }) => {
    await forwardPush(deps, 'app.bsky.notification.registerPush', auth.credentials.did, input.body)
  })
