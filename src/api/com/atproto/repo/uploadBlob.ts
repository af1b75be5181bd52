// com.atproto.repo.uploadBlob: streamed to the blob store under PDS_BLOB_UPLOAD_LIMIT (413 beyond);
// the MIME type is the request's.
import { BlobRef } from '@atproto/lexicon'
import { CID } from 'multiformats/cid'
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { storeUpload } from '#src/blob/blobs.js'
import { decodedBody } from '#src/api/request-body.js'

export default method(
  'com.atproto.repo.uploadBlob',
  (deps: Pick<Services, 'db' | 'blobstore' | 'config'>) =>
    async ({ auth, input, req }) => {
      const header = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase()
      const mimeType = header && header !== '*/*' ? header : 'application/octet-stream'
      const blob = await storeUpload(deps, auth.credentials.did, decodedBody(req, input.body), mimeType, deps.config.blobUploadLimit)
      return {
        encoding: 'application/json',
        body: { blob: new BlobRef(CID.parse(blob.cid), blob.mimeType, blob.size) },
      }
    },
)
