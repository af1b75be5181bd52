// com.atproto.server.revokeAppPassword: idempotent; revoking an unknown name is not an error.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { revokeAppPassword } from '../../../../account/app-passwords.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.server.revokeAppPassword<AuthFor<'com.atproto.server.revokeAppPassword'>>(async ({ auth, input }) => {
    await revokeAppPassword(db, auth.credentials.did, input.body.name)
  })
