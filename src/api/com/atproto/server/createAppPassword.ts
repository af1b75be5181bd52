// com.atproto.server.createAppPassword: the plaintext is in this response and nowhere else.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { createAppPassword } from '../../../../account/app-passwords.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.server.createAppPassword<AuthFor<'com.atproto.server.createAppPassword'>>(async ({ auth, input }) => ({
    encoding: 'application/json',
    body: await createAppPassword(db, auth.credentials.did, input.body.name, !!input.body.privileged),
  }))
