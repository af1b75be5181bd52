// app.bsky.actor.getPreferences: the caller's stored preferences, answered by the PDS itself.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { getPreferences } from '../../../../account/preferences.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.app.bsky.actor.getPreferences<AuthFor<'app.bsky.actor.getPreferences'>>(async ({ auth }) => {
    const { did, appPassword } = auth.credentials
    const preferences = await getPreferences(db, did, !appPassword)
    return { encoding: 'application/json', body: { preferences: preferences } }
  })
