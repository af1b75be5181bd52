// com.atproto.server.checkAccountStatus: this server's added fields and the official ones.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import { mayReadEmail, type AuthFor } from '../../../../auth/verifier.js'
import { accountStatus } from '../../../../account/status.js'

export default (api: Server, { db, config }: Pick<Services, 'db' | 'config'>) =>
  api.com.atproto.server.checkAccountStatus<AuthFor<'com.atproto.server.checkAccountStatus'>>(async ({ auth }) => ({
    encoding: 'application/json',
    body: await accountStatus(db, auth.credentials.account, config.publicUrl, mayReadEmail(auth.credentials)),
  }))
