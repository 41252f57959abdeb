//! gRPC server reflection, v1 and v1alpha, answering every request inside the stream.
//!
//! tonic-reflection (0.14) ends the whole reflection stream with a `NOT_FOUND` status when a
//! client asks for a symbol or file it does not have; the reflection protocol has an
//! `error_response` for that, and clients (grpcurl, grpcio-reflection's descriptor database,
//! Postman) go on asking on the same stream after one. Its lookup table is private, so this
//! module keeps its own, built from the same encoded descriptor sets (prost-types decodes them),
//! and serves both protocol versions from it with tonic-reflection's generated message types.

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use prost::Message;
use prost_types::{DescriptorProto, FileDescriptorProto, FileDescriptorSet};
use tonic::{Code, Request, Response, Status, Streaming};

/// The files and symbols reflection can describe.
#[derive(Debug, Default)]
pub struct Index {
    /// Each file's encoded `FileDescriptorProto` and the names of the files it imports.
    files: BTreeMap<String, (Vec<u8>, Vec<String>)>,
    /// Fully qualified symbol (package.Message, package.Service.Method, …) → its file.
    symbols: BTreeMap<String, String>,
    /// Fully qualified message names (for `all_extension_numbers_of_type`).
    messages: BTreeSet<String>,
    services: Vec<String>,
}

impl Index {
    /// The index of `sets` (encoded `FileDescriptorSet`s) and of the reflection protocols' own.
    pub fn new(sets: &[&[u8]]) -> Result<Arc<Index>, prost::DecodeError> {
        let own = [
            tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
        ];
        let mut index = Index::default();
        for set in sets.iter().chain(own.iter()) {
            for file in FileDescriptorSet::decode(*set)?.file {
                index.add(file);
            }
        }
        Ok(Arc::new(index))
    }

    fn add(&mut self, file: FileDescriptorProto) {
        let name = file.name().to_string();
        if self.files.contains_key(&name) {
            return;
        }
        let package = file.package();
        let mut symbol = |s: String| {
            self.symbols.insert(s, name.clone());
        };
        for service in &file.service {
            let full = qualify(package, service.name());
            for method in &service.method {
                symbol(format!("{full}.{}", method.name()));
            }
            symbol(full.clone());
            self.services.push(full);
        }
        for e in &file.enum_type {
            symbol(qualify(package, e.name()));
        }
        let mut messages = Vec::new();
        for m in &file.message_type {
            collect_messages(&qualify(package, m.name()), m, &mut messages);
        }
        for (full, m) in messages {
            for e in &m.enum_type {
                symbol(format!("{full}.{}", e.name()));
            }
            for f in &m.field {
                symbol(format!("{full}.{}", f.name()));
            }
            symbol(full.clone());
            self.messages.insert(full);
        }
        let deps = file.dependency.clone();
        self.files.insert(name, (file.encode_to_vec(), deps));
    }

    /// The file `name` and every file it imports (transitively) that the index holds, the file
    /// itself first.
    fn file_with_imports(&self, name: &str) -> Option<Vec<Vec<u8>>> {
        self.files.get(name)?;
        let mut seen = BTreeSet::new();
        let mut order = Vec::new();
        let mut todo = vec![name.to_string()];
        while let Some(n) = todo.pop() {
            if let Some((bytes, deps)) = self.files.get(&n) {
                if seen.insert(n) {
                    order.push(bytes.clone());
                    todo.extend(deps.iter().rev().cloned());
                }
            }
        }
        Some(order)
    }
}

fn qualify(package: &str, name: &str) -> String {
    if package.is_empty() {
        name.to_string()
    } else {
        format!("{package}.{name}")
    }
}

fn collect_messages<'a>(
    full: &str,
    m: &'a DescriptorProto,
    out: &mut Vec<(String, &'a DescriptorProto)>,
) {
    for nested in &m.nested_type {
        collect_messages(&format!("{full}.{}", nested.name()), nested, out);
    }
    out.push((full.to_string(), m));
}

/// One answer, independent of the protocol version.
enum Answer {
    Files(Vec<Vec<u8>>),
    ExtensionNumbers(String),
    Services(Vec<String>),
    Error(Code, String),
}

/// A request, independent of the protocol version.
enum Ask {
    File(String),
    Symbol(String),
    Extension(String),
    ExtensionNumbers(String),
    Services,
    Nothing,
}

fn answer(index: &Index, ask: Ask) -> Answer {
    let not_found = |what: &str, name: &str| {
        Answer::Error(
            Code::NotFound,
            format!("{what} '{name}' is not served here"),
        )
    };
    match ask {
        Ask::File(name) => match index.file_with_imports(&name) {
            Some(files) => Answer::Files(files),
            None => not_found("file", &name),
        },
        Ask::Symbol(symbol) => {
            let symbol = symbol.trim_start_matches('.');
            match index.symbols.get(symbol) {
                Some(file) => Answer::Files(index.file_with_imports(file).unwrap_or_default()),
                None => not_found("symbol", symbol),
            }
        }
        Ask::Extension(containing) => Answer::Error(
            Code::NotFound,
            format!("no extension of '{containing}' is served here (the services define none)"),
        ),
        Ask::ExtensionNumbers(t) => {
            let t = t.trim_start_matches('.');
            if index.messages.contains(t) {
                Answer::ExtensionNumbers(t.to_string())
            } else {
                not_found("message type", t)
            }
        }
        Ask::Services => Answer::Services(index.services.clone()),
        Ask::Nothing => Answer::Error(
            Code::InvalidArgument,
            "the request names no message_request".to_string(),
        ),
    }
}

/// Implements one protocol version's `ServerReflection` over [`Index`] (the v1 and v1alpha
/// messages have the same fields under different types).
macro_rules! reflection_version {
    ($service:ident) => {
        /// The reflection service of one protocol version, over a shared [`Index`].
        #[derive(Debug, Clone)]
        pub struct $service(pub Arc<Index>);

        #[tonic::async_trait]
        impl ServerReflection for $service {
            type ServerReflectionInfoStream = Pin<
                Box<dyn Stream<Item = Result<ServerReflectionResponse, Status>> + Send + 'static>,
            >;

            async fn server_reflection_info(
                &self,
                req: Request<Streaming<ServerReflectionRequest>>,
            ) -> Result<Response<Self::ServerReflectionInfoStream>, Status> {
                let index = self.0.clone();
                let answers = req.into_inner().map(move |r| r.map(|r| respond(&index, r)));
                Ok(Response::new(Box::pin(answers)))
            }
        }

        fn respond(index: &Index, req: ServerReflectionRequest) -> ServerReflectionResponse {
            let ask = match req.message_request.clone() {
                Some(MessageRequest::FileByFilename(f)) => Ask::File(f),
                Some(MessageRequest::FileContainingSymbol(s)) => Ask::Symbol(s),
                Some(MessageRequest::FileContainingExtension(e)) => {
                    Ask::Extension(e.containing_type)
                }
                Some(MessageRequest::AllExtensionNumbersOfType(t)) => Ask::ExtensionNumbers(t),
                Some(MessageRequest::ListServices(_)) => Ask::Services,
                None => Ask::Nothing,
            };
            let message = match answer(index, ask) {
                Answer::Files(file_descriptor_proto) => {
                    MessageResponse::FileDescriptorResponse(FileDescriptorResponse {
                        file_descriptor_proto,
                    })
                }
                Answer::ExtensionNumbers(base_type_name) => {
                    MessageResponse::AllExtensionNumbersResponse(ExtensionNumberResponse {
                        base_type_name,
                        extension_number: Vec::new(),
                    })
                }
                Answer::Services(names) => {
                    MessageResponse::ListServicesResponse(ListServiceResponse {
                        service: names
                            .into_iter()
                            .map(|name| ServiceResponse { name })
                            .collect(),
                    })
                }
                Answer::Error(code, error_message) => {
                    MessageResponse::ErrorResponse(ErrorResponse {
                        error_code: code as i32,
                        error_message,
                    })
                }
            };
            ServerReflectionResponse {
                valid_host: req.host.clone(),
                original_request: Some(req),
                message_response: Some(message),
            }
        }
    };
}

/// `grpc.reflection.v1`.
pub mod v1 {
    use super::*;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    pub use tonic_reflection::pb::v1::server_reflection_server::{
        ServerReflection, ServerReflectionServer,
    };
    use tonic_reflection::pb::v1::{
        ErrorResponse, ExtensionNumberResponse, FileDescriptorResponse, ListServiceResponse,
        ServerReflectionRequest, ServerReflectionResponse, ServiceResponse,
    };
    reflection_version!(Reflection);
}

/// `grpc.reflection.v1alpha`, still the only one some clients ask for.
pub mod v1alpha {
    use super::*;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse;
    pub use tonic_reflection::pb::v1alpha::server_reflection_server::{
        ServerReflection, ServerReflectionServer,
    };
    use tonic_reflection::pb::v1alpha::{
        ErrorResponse, ExtensionNumberResponse, FileDescriptorResponse, ListServiceResponse,
        ServerReflectionRequest, ServerReflectionResponse, ServiceResponse,
    };
    reflection_version!(Reflection);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> Arc<Index> {
        Index::new(&[omr_proto::FILE_DESCRIPTOR_SET]).unwrap()
    }

    #[test]
    fn symbols_files_and_services_are_found() {
        let index = index();
        assert!(index.services.contains(&"omr.v1.Detector".to_string()));
        assert!(index
            .services
            .contains(&"grpc.reflection.v1alpha.ServerReflection".to_string()));
        for symbol in [
            "omr.v1.Detector",
            ".omr.v1.Detector.GetDigest",
            "omr.v1.DigestHeader",
            "omr.v1.RegisterDetectionKeyRequest.header",
        ] {
            match answer(&index, Ask::Symbol(symbol.into())) {
                Answer::Files(files) => {
                    let first = FileDescriptorProto::decode(&files[0][..]).unwrap();
                    assert_eq!(first.package(), "omr.v1", "{symbol}");
                }
                _ => panic!("{symbol} not found"),
            }
        }
    }

    #[test]
    fn unknown_names_are_error_answers_not_stream_ends() {
        let index = index();
        for ask in [
            Ask::Symbol("omr.v1.Nope".into()),
            Ask::File("nope.proto".into()),
            Ask::Extension("omr.v1.DigestHeader".into()),
            Ask::ExtensionNumbers("omr.v1.Nope".into()),
        ] {
            assert!(matches!(
                answer(&index, ask),
                Answer::Error(Code::NotFound, _)
            ));
        }
        assert!(matches!(
            answer(&index, Ask::Nothing),
            Answer::Error(Code::InvalidArgument, _)
        ));
        assert!(matches!(
            answer(&index, Ask::ExtensionNumbers("omr.v1.DigestHeader".into())),
            Answer::ExtensionNumbers(_)
        ));
    }
}
