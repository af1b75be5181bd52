// com.atproto.identity.updateHandle: a handle on one of this server's domains, or any domain whose
// DNS record or well-known file names the account's DID, held by no other live account; a new PLC
// operation with the new alsoKnownAs (published to the directory in PDS_DID_PLC_URL mode) and an
// #identity event, all in one transaction.
import { method } from '#src/api/method.js'
import { checkHandleFree, validateHandle } from '#src/account/handles.js'
import { setHandle } from '#src/identity/amend.js'

export default method('com.atproto.identity.updateHandle', ({ db, config, rotationKey, outbound }) => async ({ auth, input }) => {
  const { did } = auth.credentials
  const handle = await validateHandle({ config, outbound }, input.body.handle, did)
  await checkHandleFree(db, did, handle)
  await setHandle(db, did, handle, { rotationKey, plcUrl: config.plcUrl })
})
