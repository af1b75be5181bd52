// com.atproto.temp.checkSignupQueue: this server has no sign-up queue, so every account is
// activated at once (what the Bluesky app asks right after sign-up).
import type { Server } from '../../../../generated/server/index.js'
import type { AuthFor } from '../../../../auth/verifier.js'

export default (api: Server) =>
  api.com.atproto.temp.checkSignupQueue<AuthFor<'com.atproto.temp.checkSignupQueue'>>(async () => ({
    encoding: 'application/json',
    body: { activated: true },
  }))
