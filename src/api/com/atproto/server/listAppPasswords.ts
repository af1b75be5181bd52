// com.atproto.server.listAppPasswords: names, dates and flags; never a secret.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { listAppPasswords } from '../../../../account/app-passwords.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.server.listAppPasswords<AuthFor<'com.atproto.server.listAppPasswords'>>(async ({ auth }) => ({
    encoding: 'application/json',
    body: { passwords: await listAppPasswords(db, auth.credentials.did) },
  }))
