// com.atproto.server.listAppPasswords: names, dates and flags; never a secret.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AccessAuth } from '../../../../auth/verifier.js'
import { listAppPasswords } from '../../../../account/app-passwords.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.server.listAppPasswords<AccessAuth>(async ({ auth }) => ({
    encoding: 'application/json',
    body: { passwords: await listAppPasswords(db, auth.credentials.did) },
  }))
