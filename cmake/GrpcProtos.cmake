# symdex_grpc_library(TARGET ROOT PROTO...): a static library of the C++ messages and gRPC stubs
# generated (protoc + grpc_cpp_plugin) from PROTO files given relative to ROOT.
find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

function(symdex_grpc_library target root)
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/generated_${target})
  set(srcs)
  foreach(rel ${ARGN})
    string(REGEX REPLACE "\\.proto$" "" base ${rel})
    set(outs ${gen}/${base}.pb.cc ${gen}/${base}.pb.h ${gen}/${base}.grpc.pb.cc ${gen}/${base}.grpc.pb.h)
    add_custom_command(
      OUTPUT ${outs}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${gen}
      COMMAND protobuf::protoc --proto_path=${root} --cpp_out=${gen} --grpc_out=${gen}
              --plugin=protoc-gen-grpc=${GRPC_CPP_PLUGIN} ${rel}
      DEPENDS ${root}/${rel} protobuf::protoc
      WORKING_DIRECTORY ${root}
      COMMENT "protoc ${rel}")
    list(APPEND srcs ${gen}/${base}.pb.cc ${gen}/${base}.grpc.pb.cc)
  endforeach()
  add_library(${target} STATIC ${srcs})
  target_include_directories(${target} PUBLIC ${gen})
  target_link_libraries(${target} PUBLIC protobuf::libprotobuf gRPC::grpc++)
  target_compile_options(${target} PRIVATE -w)  # generated code is not ours to warn about
  # protoc gives every .pb.cc the same file-static names (schemas, file_default_instances).
  set_target_properties(${target} PROPERTIES UNITY_BUILD OFF)
endfunction()
