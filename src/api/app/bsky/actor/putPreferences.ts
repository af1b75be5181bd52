// app.bsky.actor.putPreferences: replaces the caller's preferences (all of them, atomically).
import { method } from '#src/api/method.js'
import { putPreferences } from '#src/account/preferences.js'

export default method('app.bsky.actor.putPreferences', ({ db }) => async ({ auth, input }) => {
  const { did, appPassword } = auth.credentials
  await putPreferences(db, did, input.body.preferences, !appPassword)
})
