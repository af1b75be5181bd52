// com.atproto.admin.getSubjectStatus: an account's takedown and deactivation state, or the
// takedown state of one record (uri) or blob (did and blob).
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { accountByDid, subjectStatus } from '#src/account/admin-views.js'
import { blobStatus, recordStatus } from '#src/repo/takedowns.js'

export default method('com.atproto.admin.getSubjectStatus', ({ db }) => async ({ params }) => {
  const { did, uri, blob } = params
  let body
  if (blob) {
    if (!did) throw xrpcError('InvalidRequest', 'A blob subject needs the did of its repository')
    body = await blobStatus(db, did, blob)
  } else if (uri) body = await recordStatus(db, uri)
  else if (did) body = subjectStatus(await accountByDid(db, did))
  else throw xrpcError('InvalidRequest', 'Name a subject: did, uri, or did and blob')
  return { encoding: 'application/json', body }
})
