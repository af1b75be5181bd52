// com.atproto.identity.updateHandle: a handle on one of this server's domains, unique; a new PLC
// operation with the new alsoKnownAs (published to the directory in PDS_DID_PLC_URL mode) and an
// #identity event, all in one transaction.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AccessAuth } from '../../../../auth/verifier.js'
import { checkHandleFor } from '../../../../account/handles.js'
import { setHandle } from '../../../../identity/amend.js'

export default (api: Server, { db, config, rotationKey }: Pick<Services, 'db' | 'config' | 'rotationKey'>) =>
  api.com.atproto.identity.updateHandle<AccessAuth>(async ({ auth, input }) => {
    const { did } = auth.credentials
    const handle = await checkHandleFor(db, did, input.body.handle, config.handleDomains)
    await setHandle(db, did, handle, { rotationKey, plcUrl: config.plcUrl })
  })
