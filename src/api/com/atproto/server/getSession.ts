// com.atproto.server.getSession: who the access token belongs to.
import type { Server } from '../../../../generated/server/index.js'
import type { OutputSchema } from '../../../../generated/server/types/com/atproto/server/getSession.js'
import type { Services } from '../../../../context.js'
import { mayReadEmail, type AuthFor } from '../../../../auth/verifier.js'
import { sessionView } from '../../../../account/store.js'
import { jsonText } from '../../../json-text.js'

export default (api: Server, { db, config }: Pick<Services, 'db' | 'config'>) =>
  api.com.atproto.server.getSession<AuthFor<'com.atproto.server.getSession'>>(async ({ auth }) =>
    // plain JSON values only (strings, booleans): nothing for xrpc-server's lexToJson to convert
    jsonText<OutputSchema>(
      JSON.stringify(await sessionView(db, auth.credentials.account, config.publicUrl, mayReadEmail(auth.credentials))),
    ),
  )
