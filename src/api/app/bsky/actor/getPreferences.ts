// app.bsky.actor.getPreferences: the caller's stored preferences, answered by the PDS itself.
import { method } from '#src/api/method.js'
import { getPreferences } from '#src/account/preferences.js'

export default method('app.bsky.actor.getPreferences', ({ db }) => async ({ auth }) => {
  const { did, appPassword } = auth.credentials
  const preferences = await getPreferences(db, did, !appPassword)
  return { encoding: 'application/json', body: { preferences: preferences } }
})
