// com.atproto.temp.checkSignupQueue: this server has no sign-up queue, so every account is
// activated at once (what the Bluesky app asks right after sign-up).
import { method } from '#src/api/method.js'

export default method('com.atproto.temp.checkSignupQueue', () => async () => ({
  encoding: 'application/json',
  body: { activated: true },
}))
