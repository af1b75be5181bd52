// app.bsky.notification.registerPush: forwarded for the account to the notification service the
// body names (`serviceDid`), with a service token addressed to it for this method.
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { forwardPush } from '#src/proxy/push.js'

export default method(
  'app.bsky.notification.registerPush',
  (deps: Pick<Services, 'config' | 'db' | 'tokenKeys' | 'outbound' | 'logger' | 'didResolver'>) =>
    async ({ auth, input }) => {
      await forwardPush(deps, 'app.bsky.notification.registerPush', auth.credentials.did, input.body)
    },
)
