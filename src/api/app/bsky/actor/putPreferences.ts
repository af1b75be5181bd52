// app.bsky.actor.putPreferences: replaces the caller's preferences (all of them, atomically).
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { putPreferences } from '../../../../account/preferences.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.app.bsky.actor.putPreferences<AuthFor<'app.bsky.actor.putPreferences'>>(async ({ auth, input }) => {
    const { did, appPassword } = auth.credentials
    await putPreferences(db, did, input.body.preferences, !appPassword)
  })
