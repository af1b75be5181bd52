// com.atproto.server.getSession: who the access token belongs to.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AccessAuth } from '../../../../auth/verifier.js'
import { sessionView } from '../../../../account/store.js'

export default (api: Server, { db, config }: Pick<Services, 'db' | 'config'>) =>
  api.com.atproto.server.getSession<AccessAuth>(async ({ auth }) => ({
    encoding: 'application/json',
    body: await sessionView(db, auth.credentials.account, config.publicUrl),
  }))
